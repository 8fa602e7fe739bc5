package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
)

// exitGate is the exit code of a CI gate that trips (--fail-on,
// --max-growth, --max-peak).
const exitGate = 3

// gateError reports a tripped CI gate; it exits with code 3.
type gateError struct{ reasons []string }

func (e *gateError) Error() string { return "gate: " + strings.Join(e.reasons, "; ") }

// analyzeFlags are analyze's options.
type analyzeFlags struct {
	json          bool
	failOn        []string
	maxGrowth     bytesFlag
	maxPeak       bytesFlag
	focus, ignore string
	maxMemory     bytesFlag
	progress      bool
	rules         string
}

// load is how the flags bound and report loading.
func (fl analyzeFlags) load() loadOptions {
	return loadOptions{maxMemory: int64(fl.maxMemory.Bytes), progress: fl.progress, gc: gcLimitOnly}
}

// bytesFlag is a size flag ("64MiB") that remembers whether it was set.
type bytesFlag struct {
	units.Bytes
	set bool
}

func (b *bytesFlag) Set(s string) error {
	b.set = true
	return b.Bytes.Set(s)
}

func (b *bytesFlag) Type() string { return "size" }

func (b *bytesFlag) String() string {
	if !b.set {
		return ""
	}
	return b.Bytes.String()
}

func newAnalyzeCommand(stdout, stderr io.Writer) *cobra.Command {
	var fl analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze [flags] PATH...",
		Short: "Tell whether each process leaks, fragments or ran out of memory, and which line did it",
		Long: `Analyze groups snapshots, memory-log CSVs and memory_summary() or OOM text
dumps into processes (rank, pid and tag from names such as
step2/actor_rank0_pid746.pickle), orders each process's snapshots by step,
and compares them: callsites whose live bytes grow steadily are leaks;
cached memory (reserved minus allocated) that grows steadily beyond 1.5x
the peak allocated is fragmentation. Each snapshot's trace adds its peak,
OOMs and per-step growth. Memory logs give the same verdicts from their
totals, without naming code.

PATH may be a file, "-" (a snapshot on standard input), a directory
(searched recursively) or a quoted glob; directories and globs contribute
their snapshots, memory-log CSVs and memory_summary/OOM text files.

A big snapshot is decoded on every core. A big gzip or zstd file is first
decompressed into a temporary file in $TMPDIR where enough cores make it
pay: on disk (not tmpfs), only with as much free space left after it, and
unlinked as soon as it is made; elsewhere it is decoded as a stream.

Exit status 3 when the gate (--fail-on, --max-growth, --max-peak) trips.`,
		Example: `  vramscope analyze testdata/scenarios/out/leak_closure
  vramscope analyze --json --fail-on leak,oom runs/step*/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnalyze(cmd.Context(), stdout, stderr, args, fl)
		},
	}
	fl.register(cmd)
	return cmd
}

// register defines analyze's flags on cmd; record shares them.
func (fl *analyzeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print the report as JSON")
	f.StringSliceVar(&fl.failOn, "fail-on", nil, "exit 3 when a process's verdict is one of these: leak, fragmentation, oom")
	f.Var(&fl.maxGrowth, "max-growth", "exit 3 when a leak or fragmentation grows more than this per step (e.g. 64MiB)")
	f.Var(&fl.maxPeak, "max-peak", "exit 3 when a process's peak allocated memory exceeds this (e.g. 40GiB)")
	f.StringVar(&fl.focus, "focus", "", "regexp of frames (file or function) to treat as user code")
	f.StringVar(&fl.ignore, "ignore", "", "regexp of frames to skip when naming the callsite")
	f.Var(&fl.maxMemory, "max-memory", "decode snapshots at once only while their estimated memory (1.2x the raw pickle) fits this (default: half the memory available)")
	f.BoolVar(&fl.progress, "progress", false, "print the loading's progress on stderr, a line per snapshot, even when stderr is not a terminal (on one it is shown anyway)")
	f.StringVar(&fl.rules, "rules", "", "file of your own breakdown categories, NAME frame|annotation|metadata REGEX a line (see breakdown --help)")
}

// gateVerdicts are the verdicts --fail-on accepts.
var gateVerdicts = []analyze.Verdict{analyze.Leak, analyze.Fragmentation, analyze.OOM}

// filter checks the flags that parsing does not (a --fail-on value that is
// not a verdict, a bad regexp) and returns the callsite filter.
func (fl analyzeFlags) filter() (*callsite.Filter, error) {
	for _, v := range fl.failOn {
		if !slices.Contains(gateVerdicts, analyze.Verdict(v)) {
			return nil, fmt.Errorf("--fail-on %q: want leak, fragmentation or oom", v)
		}
	}
	return callsite.NewFilter(fl.focus, fl.ignore)
}

func runAnalyze(ctx context.Context, stdout, stderr io.Writer, args []string, fl analyzeFlags) error {
	filter, err := fl.filter()
	if err != nil {
		return err
	}
	rules, err := readRules(fl.rules)
	if err != nil {
		return err
	}
	a := analyze.New(analyze.Options{Filter: filter, Rules: rules})
	failed, total, err := loadAll(ctx, stderr, args, a, fl.load())
	if err != nil {
		return err
	}
	rep := a.Report()
	if fl.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeAnalysis(stdout, rep)
	}
	if err != nil {
		return err
	}
	// An unreadable input outranks the gate: the verdict is incomplete.
	if failed > 0 {
		return unreadable(failed, total)
	}
	if reasons := gate(rep, fl); len(reasons) > 0 {
		return &gateError{reasons: reasons}
	}
	return nil
}

// gate lists why the report fails the CI gate set by the flags.
func gate(rep *analyze.Report, fl analyzeFlags) []string {
	var reasons []string
	for _, p := range rep.Processes {
		if slices.Contains(fl.failOn, string(p.Verdict)) {
			reasons = append(reasons, fmt.Sprintf("%s: verdict %s (--fail-on)", p.ID, p.Verdict))
		}
		for _, f := range p.Findings {
			if fl.maxGrowth.set && f.BytesPerStep > int64(fl.maxGrowth.Bytes) {
				reasons = append(reasons, fmt.Sprintf("%s: %s grows %s per step, over --max-growth %s",
					p.ID, f.Kind, units.Bytes(f.BytesPerStep), fl.maxGrowth.Bytes))
			}
		}
		for _, d := range p.Stats.Devices {
			// The limit is a GPU's: each device's peak is held to it.
			if peak := d.PeakAllocatedBytes; fl.maxPeak.set && peak != nil && *peak > int64(fl.maxPeak.Bytes) {
				where := p.ID
				if len(p.Stats.Devices) > 1 {
					where += fmt.Sprintf(" cuda:%d", d.Device)
				}
				reasons = append(reasons, fmt.Sprintf("%s: peak allocated %s, over --max-peak %s",
					where, units.Bytes(*peak), fl.maxPeak.Bytes))
			}
		}
	}
	return reasons
}
