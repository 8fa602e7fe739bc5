package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
)

// breakdownRows is how many module or callsite rows the text prints.
const breakdownRows = 20

// breakdownFlags are the breakdown command's options.
type breakdownFlags struct {
	filterFlags
	at, by, rules string
	asJSON        bool
}

func newBreakdownCommand(stdout, stderr io.Writer) *cobra.Command {
	var bf breakdownFlags
	cmd := &cobra.Command{
		Use:   "breakdown [--at peak|end|step N|EVENT] [--by category|module|callsite|rule] [--json] [--rules FILE] FILE...",
		Short: "What the memory is made of: bytes by category, module or callsite at any moment",
		Long: `Breakdown labels every block of each device's trace with a category
(parameter, buffer, gradient, optimizer_state, activation, temporary, input,
kv_cache, communication, workspace, graph_pool, before_recording, unknown) and
the module whose forward allocated it, then prints the allocated bytes at one
moment grouped by category (the default), by module, by callsite or by rule.

The categories come from the allocation stacks first (module _apply for
parameters, an optimizer's _init_group for its state, transformers'
cache_utils for the KV cache, cuBLAS frames for workspaces, torch.distributed
for communication buffers), then from lifetimes and phases (allocated in a
forward and freed in backward is an activation; allocated in backward and kept
until zero_grad a gradient; freed in the phase that made it a temporary). Record
with stacks="all" for the most certain answer. --by rule shows which rule
decided how many bytes, and on what evidence.

--at picks the moment: the allocated peak (default), the end of the trace,
step N (the peak inside the trace's N-th step, found as the steps command finds
them) or an event index.

--rules FILE adds your own categories before the built-in ones, one rule a
line, "NAME frame|annotation|metadata REGEX", first match wins:

  # an RL job split three ways
  rollout   frame       generate \(.*rollout\.py
  reference annotation  ^ref_forward
  actor     metadata    module=actor\.

FILE may be a snapshot (.pickle, gzip or zstd, recognized by content), "-" for
standard input, a directory (searched recursively) or a quoted glob.`,
		Example: `  vramscope breakdown run.pickle.gz
  vramscope breakdown --at end --by module run.pickle.gz
  vramscope breakdown --at "step 2" --json run.pickle.gz`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBreakdown(cmd.Context(), stdout, stderr, args, bf)
		},
	}
	bf.register(cmd)
	cmd.Flags().StringVar(&bf.at, "at", "peak", "the moment: peak, end, step N, or an event index")
	cmd.Flags().StringVar(&bf.by, "by", "category", "group by category, module, callsite or rule")
	cmd.Flags().StringVar(&bf.rules, "rules", "", "file of your own rules, NAME frame|annotation|metadata REGEX a line")
	cmd.Flags().BoolVar(&bf.asJSON, "json", false, `print JSON: {"version":1,"devices":[{"path","device","at","total_bytes","categories","by","rows"}]}`)
	return cmd
}

// readRules reads a --rules file; none without a path.
func readRules(path string) ([]breakdown.Rule, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &inputError{msg: err.Error()}
	}
	defer f.Close()
	rules, err := breakdown.ParseRules(f)
	if err != nil {
		return nil, &inputError{msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return rules, nil
}

// breakdownDevice is one device's table: breakdown --json's record.
type breakdownDevice struct {
	Path string `json:"path"`
	breakdown.Summary
	By   breakdown.By    `json:"by"`
	Rows []breakdown.Row `json:"rows"`
}

func runBreakdown(ctx context.Context, stdout, stderr io.Writer, args []string, bf breakdownFlags) error {
	by := breakdown.By(bf.by)
	if by != breakdown.ByCategory && by != breakdown.ByModule && by != breakdown.ByCallsite && by != breakdown.ByRule {
		return fmt.Errorf("--by %q: want category, module, callsite or rule", bf.by)
	}
	if err := breakdown.CheckAt(bf.at); err != nil {
		return err
	}
	f, err := bf.filter()
	if err != nil {
		return err
	}
	rules, err := readRules(bf.rules)
	if err != nil {
		return err
	}
	ins, err := expandSnapshots(stderr, args)
	if err != nil {
		return err
	}
	all := []breakdownDevice{}
	failed := 0
	gate := newMemoryGate(defaultMaxMemory(), gcLimit) // as perFile's
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			return err
		}
		held := gate.acquire(in)
		devs, err := breakdownInput(in, stderr, f, rules, bf.at, by)
		gate.release(held)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "vramscope: %s: %v\n", in, err)
			continue
		}
		if bf.asJSON {
			all = append(all, devs...)
			continue
		}
		if err := writeBreakdown(stdout, in, devs); err != nil {
			return err
		}
	}
	if bf.asJSON {
		if err := writeJSON(stdout, struct {
			Version int               `json:"version"`
			Devices []breakdownDevice `json:"devices"`
		}{1, all}); err != nil {
			return err
		}
	}
	return unreadable(failed, len(ins))
}

// breakdownInput classifies each device of one input and takes its table
// at the moment --at names.
func breakdownInput(in inputs.Input, stderr io.Writer, f *callsite.Filter, rules []breakdown.Rule, spec string, by breakdown.By) ([]breakdownDevice, error) {
	sn, tls, err := loadDevices(in, stderr)
	if err != nil {
		return nil, err
	}
	var out []breakdownDevice
	for _, tl := range tls {
		b := breakdown.Classify(sn, tl, breakdown.Options{Filter: f, Rules: rules, Source: &callsite.Source{}})
		var steps diagnose.Steps
		if breakdown.NeedsSteps(spec) {
			steps = diagnose.DetectSteps(sn, tl, f)
		}
		at, err := breakdown.ParseAt(tl, steps, spec)
		if err != nil {
			return nil, &inputError{msg: err.Error()}
		}
		t := b.Table(at.Event, by)
		out = append(out, breakdownDevice{Path: in.String(), Summary: b.Summary(at), By: by, Rows: t.Rows})
	}
	return out, nil
}

// writeBreakdown prints one input's tables for people.
func writeBreakdown(w io.Writer, in inputs.Input, devs []breakdownDevice) error {
	var b strings.Builder
	name := in.String()
	if name == inputs.Stdin {
		name = "stdin"
	}
	fmt.Fprintf(&b, "%s\n", name)
	for _, d := range devs {
		fmt.Fprintf(&b, "\ndevice %d at %s (event %d): %s allocated\n", d.Device, d.At.Label, d.At.Event, units.Bytes(d.TotalBytes))
		rows := d.Rows
		if d.By != breakdown.ByCategory && len(rows) > breakdownRows {
			rows = rows[:breakdownRows]
		}
		// Names read left-aligned, numbers right-aligned.
		width := len(d.By)
		for _, r := range rows {
			width = max(width, len(r.Name))
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "  %-*s\tbytes\tshare\tblocks\t\n", width, d.By)
		for _, r := range rows {
			if r.Bytes == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %-*s\t%s\t%.1f%%\t%d\t\n", width, r.Name, units.Bytes(r.Bytes), 100*float64(r.Bytes)/float64(max(d.TotalBytes, 1)), r.Blocks)
		}
		if len(rows) < len(d.Rows) {
			fmt.Fprintf(tw, "  %-*s\t\t\t\t\n", width, fmt.Sprintf("(%d more)", len(d.Rows)-len(rows)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// madeOfSteps: a long run prints the categories of its first and last
// steps only.
const madeOfSteps = 3

// writeMadeOf prints what each device's memory is made of at its peak, at
// its end and at each step's peak, and the category that grows, one line
// each; named says whether to name the device.
func writeMadeOf(b *strings.Builder, reports []breakdown.Report, named bool) {
	for _, r := range reports {
		dev := ""
		if named {
			dev = fmt.Sprintf(" on cuda:%d", r.Device)
		}
		fmt.Fprintf(b, "  made of%s (allocated bytes by category):\n", dev)
		line := func(label string, s breakdown.Summary) {
			fmt.Fprintf(b, "    %-8s %s\n", label, categoriesText(s))
		}
		line("peak", r.Peak)
		line("end", r.End)
		for k, s := range r.Steps {
			if len(r.Steps) > 2*madeOfSteps && k == madeOfSteps {
				fmt.Fprintf(b, "    %-8s (%d more steps)\n", "...", len(r.Steps)-2*madeOfSteps+r.StepsOmitted)
			}
			if len(r.Steps) <= 2*madeOfSteps || k < madeOfSteps || k >= len(r.Steps)-madeOfSteps {
				line(s.At.Label, s)
			}
		}
		if c, g := r.Growing(); c != "" {
			fmt.Fprintf(b, "    %-8s %s +%s per step\n", "grows", c.Title(), units.Bytes(g))
		}
	}
}

// categoriesText is a summary for a line: "706.55 MiB: 256.22 MiB optimizer
// state, 128.11 MiB parameter, ...", categories of 0 bytes left out.
func categoriesText(s breakdown.Summary) string {
	parts := []string{}
	for _, c := range slices.SortedStableFunc(maps.Keys(s.Categories), func(x, y breakdown.Category) int {
		return cmp.Or(cmp.Compare(s.Categories[y], s.Categories[x]), strings.Compare(string(x), string(y)))
	}) {
		if n := s.Categories[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", units.Bytes(n), c.Title()))
		}
	}
	return fmt.Sprintf("%s: %s", units.Bytes(s.TotalBytes), strings.Join(parts, ", "))
}
