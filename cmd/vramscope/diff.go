package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/report/page"
)

// diffFlags are diff's options.
type diffFlags struct {
	filterFlags
	at        string
	by        []string
	rules     string
	lines     bool
	top       int
	maxGrowth growthFlag
	json      bool
	html      string
	ranks     []int
	steps     []int
}

// growthFlag is --max-growth: bytes ("64MiB") or a percentage of A ("5%").
type growthFlag struct {
	bytes   units.Bytes
	percent float64
	isPct   bool
	set     bool
}

func (g *growthFlag) Set(s string) error {
	g.set = true
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("%q: want a size (64MiB) or a percentage (5%%)", s)
		}
		g.percent, g.isPct = v, true
		return nil
	}
	return g.bytes.Set(s)
}

func (g *growthFlag) Type() string { return "size|pct" }

func (g *growthFlag) String() string {
	switch {
	case !g.set:
		return ""
	case g.isPct:
		return strconv.FormatFloat(g.percent, 'g', -1, 64) + "%"
	}
	return g.bytes.String()
}

// over says whether growing from a to b bytes exceeds the limit.
func (g *growthFlag) over(a, b int64) bool {
	if !g.set {
		return false
	}
	if g.isPct {
		return float64(b-a) > float64(a)*g.percent/100
	}
	return b-a > int64(g.bytes)
}

func newDiffCommand(stdout, stderr io.Writer) *cobra.Command {
	var fl diffFlags
	cmd := &cobra.Command{
		Use:   "diff [flags] A B | diff [flags] RUN --ranks R1,R2 | diff [flags] RUN --steps S1,S2",
		Short: "Compare two snapshots, runs, ranks or steps: what B holds that A did not, by callsite",
		Long: `Diff compares the GPU memory of two recordings at one moment of each: the
allocated peak (--at peak, the default), the end (--at end: what was live at
the dump) or the end of a step (--at "step N": the dump of step N when the
file names carry steps, else step N of the trace as steps finds it).

A and B are snapshots or folders of them (runs). Two runs are compared
process by process, matched by the tag and rank their file names carry
(pids differ between runs); of each process the last snapshot is taken, or
the dump of step N. One RUN with --ranks R1,R2 compares two ranks of it;
with --steps S1,S2 it compares each process's dumps of two steps (at their
ends unless --at says otherwise).

For each pair and device it prints A, B and B - A of the allocated and
reserved bytes at that moment and of the trace peaks; the allocator
settings (allocator_settings) that differ; the torch versions where a file
beside the snapshots says them and they differ; and the live bytes by
callsite, by category (parameter, gradient, optimizer_state, activation,
..., as breakdown labels each block) and by module, each row marked added,
removed, grown or shrunk, largest difference first, the rest summed (--by
picks the tables). Callsites are grouped without line
numbers (--lines keeps them), and files without their folders, so that a
small edit or another checkout still matches.

--max-growth makes it a CI gate: exit 3 when B's allocated bytes at the
moment exceed A's by more than a size (64MiB) or a percentage of A (5%).`,
		Example: `  vramscope diff testdata/scenarios/out/peak_chunked testdata/scenarios/out/peak_upcast
  vramscope diff --at end testdata/scenarios/out/leak_fixed testdata/scenarios/out/leak_closure
  vramscope diff runs/ddp --ranks 0,1
  vramscope diff --max-growth 5% --json main/ pr/`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(fl.ranks) > 0 || len(fl.steps) > 0:
				if len(fl.ranks) > 0 && len(fl.steps) > 0 {
					return errors.New("--ranks and --steps: give one of them")
				}
				if len(fl.ranks) != 0 && len(fl.ranks) != 2 || len(fl.steps) != 0 && len(fl.steps) != 2 {
					return errors.New("--ranks and --steps take two numbers: A,B")
				}
				if len(args) < 1 {
					return errors.New("--ranks and --steps need the RUN to look in")
				}
			case len(args) != 2:
				return fmt.Errorf("want two snapshots or runs, A and B; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), stdout, stderr, args, fl, cmd.Flags().Changed("at"))
		},
	}
	f := cmd.Flags()
	fl.register(cmd)
	f.StringVar(&fl.at, "at", "peak", `the moment to compare: peak, end or "step N"`)
	f.StringSliceVar(&fl.by, "by", nil, "the tables to show: callsite, category, module (default all three)")
	f.StringVar(&fl.rules, "rules", "", "file of your own category rules, as breakdown's --rules")
	f.BoolVar(&fl.lines, "lines", false, "tell callsites apart by line number too")
	f.IntVar(&fl.top, "top", 10, "rows to show per table; the rest are summed (0: all)")
	f.Var(&fl.maxGrowth, "max-growth", "exit 3 when B's allocated bytes at the moment exceed A's by more than this size or percentage of A (64MiB, 5%)")
	f.BoolVar(&fl.json, "json", false, "print the comparison as JSON")
	f.StringVar(&fl.html, "html", "", "also write the comparison as a self-contained HTML page to `FILE`")
	f.IntSliceVar(&fl.ranks, "ranks", nil, "compare two ranks of one RUN: R1,R2")
	f.IntSliceVar(&fl.steps, "steps", nil, "compare each process's dumps of two steps of one RUN: S1,S2")
	return cmd
}

// sidePair is what one pair compares: a name and each side's input.
type sidePair struct {
	name string
	a, b sideInput
}

// sideInput is one side's snapshot and the step whose end it was dumped at.
type sideInput struct {
	in   inputs.Input
	step *int
}

func runDiff(ctx context.Context, stdout, stderr io.Writer, args []string, fl diffFlags, atSet bool) error {
	filter, err := fl.filter()
	if err != nil {
		return err
	}
	at, err := diff.ParseMoment(fl.at)
	if err != nil {
		return err
	}
	if len(fl.steps) == 2 && !atSet {
		at = diff.Moment{Kind: diff.End} // each side's own dump
	}
	by, err := diffBy(fl.by)
	if err != nil {
		return err
	}
	rules, err := readRules(fl.rules)
	if err != nil {
		return err
	}
	pairs, unmatched, err := diffPairs(stderr, args, fl, at)
	if err != nil {
		return err
	}
	opts := diff.Options{At: at, By: by, Rules: rules, Lines: fl.lines, Top: fl.top, Filter: filter}
	rep := diff.NewReport(opts)
	rep.Unmatched = append(rep.Unmatched, unmatched...)
	for _, sp := range pairs {
		if err := ctx.Err(); err != nil {
			return err
		}
		// One pair's snapshots at a time: a run of many GB-sized ranks
		// needs memory for two.
		a, err := loadSide(sp.a, stderr)
		if err != nil {
			return err
		}
		b, err := loadSide(sp.b, stderr)
		if err != nil {
			return err
		}
		p, err := diff.Compare(sp.name, a, b, opts)
		if err != nil {
			return &inputError{msg: err.Error()}
		}
		rep.Pairs = append(rep.Pairs, p)
	}
	if fl.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeDiff(stdout, rep)
	}
	if err != nil {
		return err
	}
	if fl.html != "" {
		if err := writeFile(fl.html, func(w io.Writer) error { return page.WriteDiff(w, "vramscope diff", rep) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "vramscope: wrote %s\n", fl.html)
	}
	if reasons := diffGate(rep, &fl.maxGrowth); len(reasons) > 0 {
		return &gateError{reasons: reasons}
	}
	return nil
}

// diffBy checks --by: the tables in display order, all when none is named.
func diffBy(names []string) ([]breakdown.By, error) {
	if len(names) == 0 {
		return diff.AllBy, nil
	}
	var out []breakdown.By
	for _, by := range diff.AllBy {
		if slices.Contains(names, string(by)) {
			out = append(out, by)
		}
	}
	for _, n := range names {
		if !slices.Contains(diff.AllBy, breakdown.By(n)) {
			return nil, fmt.Errorf("--by %q: want callsite, category or module", n)
		}
	}
	return out, nil
}

// diffPairs resolves the arguments into the pairs of snapshots to compare.
func diffPairs(stderr io.Writer, args []string, fl diffFlags, at diff.Moment) ([]sidePair, []string, error) {
	run := func(args []string) ([]diff.Process, error) {
		ins, err := expandSnapshots(stderr, args)
		if err != nil {
			return nil, err
		}
		return diff.Processes(ins), nil
	}
	pick := func(p diff.Process) sideInput {
		in, step := p.Pick(at)
		return sideInput{in, step}
	}
	var out []sidePair
	switch {
	case len(fl.steps) == 2:
		procs, err := run(args)
		if err != nil {
			return nil, nil, err
		}
		// A process without a dump of either step is left out and named.
		var missing []string
		for _, p := range procs {
			a, errA := p.Dump(fl.steps[0])
			b, errB := p.Dump(fl.steps[1])
			if err := cmp.Or(errA, errB); err != nil {
				missing = append(missing, err.Error())
				continue
			}
			name := fmt.Sprintf("%s step %d vs step %d", p.Name, fl.steps[0], fl.steps[1])
			out = append(out, sidePair{name, sideInput{a, &a.Step}, sideInput{b, &b.Step}})
		}
		if len(out) == 0 {
			return nil, nil, &inputError{msg: "--steps: " + strings.Join(missing, "; ")}
		}
		return out, missing, nil
	case len(fl.ranks) == 2:
		procs, err := run(args)
		if err != nil {
			return nil, nil, err
		}
		var as, bs []diff.Process
		for _, p := range procs {
			switch {
			case p.HasRank && p.Rank == fl.ranks[0]:
				as = append(as, p)
			case p.HasRank && p.Rank == fl.ranks[1]:
				bs = append(bs, p)
			}
		}
		if len(as) == 0 || len(bs) == 0 {
			return nil, nil, &inputError{msg: fmt.Sprintf("--ranks %d,%d: the run has %s", fl.ranks[0], fl.ranks[1], ranksOf(procs))}
		}
		// The ranks differ by construction: their processes match by tag.
		for _, ps := range [][]diff.Process{as, bs} {
			for k := range ps {
				ps[k].Key = ps[k].Tag
			}
		}
		return matched(as, bs, pick, func(a, b diff.Process) string { return a.Name + " vs " + b.Name })
	}
	as, err := run(args[:1])
	if err != nil {
		return nil, nil, err
	}
	bs, err := run(args[1:])
	if err != nil {
		return nil, nil, err
	}
	return matched(as, bs, pick, func(a, b diff.Process) string {
		switch {
		case len(as) == 1 && len(bs) == 1:
			return ""
		case a.Key == b.Key:
			return a.Name
		}
		return a.Name + " vs " + b.Name
	})
}

// matched pairs two runs' processes and picks each one's snapshot.
func matched(as, bs []diff.Process, pick func(diff.Process) sideInput, name func(a, b diff.Process) string) ([]sidePair, []string, error) {
	procs, unmatched := diff.Match(as, bs)
	if len(procs) == 0 {
		return nil, nil, &inputError{msg: "no process of A matches one of B: " + strings.Join(unmatched, ", ")}
	}
	var out []sidePair
	for _, pp := range procs {
		out = append(out, sidePair{name(pp[0], pp[1]), pick(pp[0]), pick(pp[1])})
	}
	return out, unmatched, nil
}

// ranksOf lists the ranks of procs for an error message.
func ranksOf(procs []diff.Process) string {
	var rs []string
	for _, p := range procs {
		if p.HasRank {
			rs = append(rs, strconv.Itoa(p.Rank))
		}
	}
	if len(rs) == 0 {
		return "no rank in its file names"
	}
	return "ranks " + strings.Join(rs, ", ")
}

// loadSide loads and replays one side's snapshot.
func loadSide(s sideInput, stderr io.Writer) (*diff.Side, error) {
	sn, tls, err := loadDevices(s.in, stderr)
	if err != nil {
		return nil, &inputError{msg: fmt.Sprintf("%s: %v", s.in, err)}
	}
	return &diff.Side{Path: s.in.String(), Snapshot: sn, Timelines: tls, TorchVersion: diff.TorchVersion(s.in.Path), FileStep: s.step}, nil
}

// diffGate lists why the comparison fails --max-growth: B's allocated
// bytes at the moment exceed A's by more than the limit on some device.
func diffGate(rep *diff.Report, g *growthFlag) []string {
	var reasons []string
	for _, p := range rep.Pairs {
		for _, d := range p.Devices {
			if !g.over(d.A.AllocatedBytes, d.B.AllocatedBytes) {
				continue
			}
			where := p.Name
			if len(p.Devices) > 1 || where == "" {
				where = strings.TrimSpace(fmt.Sprintf("%s cuda:%d", where, max(d.B.Device, d.A.Device)))
			}
			reasons = append(reasons, fmt.Sprintf("%s: allocated at %s grows %s (%s -> %s), over --max-growth %s",
				where, momentPhrase(rep.At), signed(d.Delta.AllocatedBytes), units.Bytes(d.A.AllocatedBytes), units.Bytes(d.B.AllocatedBytes), g))
		}
	}
	return reasons
}

// signed prints a byte difference with its sign.
func signed(n int64) string {
	if n > 0 {
		return "+" + units.Bytes(n).String()
	}
	return units.Bytes(n).String()
}
