package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
)

// filterFlags are the --focus/--ignore flags of the commands that blame
// callsites.
type filterFlags struct{ focus, ignore string }

func (ff *filterFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&ff.focus, "focus", "", "regexp of frames (file or function) to treat as your code even inside libraries")
	cmd.Flags().StringVar(&ff.ignore, "ignore", "", "regexp of further frames (file or function) to skip when blaming a line")
}

func (ff *filterFlags) filter() (*callsite.Filter, error) {
	return callsite.NewFilter(ff.focus, ff.ignore)
}

func newExplainCommand(stdout, stderr io.Writer) *cobra.Command {
	var ff filterFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "explain [--focus RE] [--ignore RE] [--json] FILE...",
		Short: "Explain the peak, fragmentation and OOMs of snapshots, line of code by line of code",
		Long: `Explain replays each snapshot's trace and prints, per device:

Peak: the allocated and reserved peaks (equal to torch's max_memory_allocated
and max_memory_reserved when recording started with the process), the blocks
live at the allocated peak by callsite, split into persistent and transient
ones, and how much lower the peak would be without the largest transient.

Fragmentation, at the end and at the peaks: reserved minus allocated split
into fully free segments (what empty_cache() returns), free memory trapped in
partly used segments, pending frees and private pools; the largest free block
per stream, pool and size class; the segments that pin the most free memory
and the callsites that pin them; advice that follows from these numbers.

OOM: for each failed allocation, the request, the segment it needed, why the
largest free block could not serve it, and what to change.

A callsite is the first frame of your code: torch, installed packages, the
standard library and C++ frames are skipped. --focus and --ignore adjust that.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			return explain(cmd.Context(), stdout, stderr, args, f, asJSON)
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the findings as JSON: {"files":[{"path", "findings":[...]}]}`)
	return cmd
}

// explainedFile is one input's findings, for --json.
type explainedFile struct {
	Path     string             `json:"path"`
	Findings []diagnose.Finding `json:"findings"`
}

// explain reads every input named by args and explains each device. As in
// stats, an unreadable input is reported and the others still are.
func explain(ctx context.Context, stdout, stderr io.Writer, args []string, f *callsite.Filter, asJSON bool) error {
	ins, skipped, err := inputs.Expand(args)
	if err != nil {
		return &inputError{msg: err.Error()}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "vramscope: skipped %s (first: %s)\n", units.Plural(len(skipped), "non-snapshot file"), skipped[0])
	}
	all := []explainedFile{}
	failed := 0
	for n, in := range ins {
		if err := ctx.Err(); err != nil {
			return err
		}
		reports, err := explainInput(in, stderr, f)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "vramscope: %s: %v\n", in, err)
			continue
		}
		if asJSON {
			ef := explainedFile{Path: in.Path, Findings: []diagnose.Finding{}}
			for _, r := range reports {
				ef.Findings = append(ef.Findings, r.Findings...)
			}
			all = append(all, ef)
			continue
		}
		if n > 0 {
			fmt.Fprintln(stdout)
		}
		if err := writeExplanation(stdout, in, reports); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Files []explainedFile `json:"files"`
		}{all}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &inputError{msg: fmt.Sprintf("%d of %d inputs could not be read", failed, len(ins))}
	}
	return nil
}

// explainInput loads, replays and explains one input.
func explainInput(in inputs.Input, stderr io.Writer, f *callsite.Filter) ([]*diagnose.DeviceReport, error) {
	sn, err := load(in, stderr)
	if err != nil {
		return nil, err
	}
	tls, err := replay.Devices(sn)
	if err != nil {
		return nil, err
	}
	out := make([]*diagnose.DeviceReport, 0, len(tls))
	for _, tl := range tls {
		r, err := diagnose.Explain(sn, tl, f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
