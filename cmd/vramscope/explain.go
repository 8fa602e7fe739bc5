package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
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
		Example: `  vramscope explain testdata/scenarios/out/frag_oom/frag_oom.pickle.gz
  vramscope explain --focus "mylib/" --json step4/*.pickle`,
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

// explainedFile is one input's findings: --json prints the exported
// fields, the text report reads the device reports.
type explainedFile struct {
	Path     string             `json:"path"`
	Findings []diagnose.Finding `json:"findings"`
	// Breakdown is what each traced device's memory is made of.
	Breakdown []breakdown.Report `json:"breakdown"`
	in        inputs.Input
	reports   []*diagnose.DeviceReport
}

// explain reads every input named by args and explains each device.
func explain(ctx context.Context, stdout, stderr io.Writer, args []string, f *callsite.Filter, asJSON bool) error {
	analyse := func(in inputs.Input) (explainedFile, error) {
		reports, made, err := explainInput(in, stderr, f)
		if err != nil {
			return explainedFile{}, err
		}
		ef := explainedFile{Path: in.Path, Findings: []diagnose.Finding{}, Breakdown: made, in: in, reports: reports}
		for _, r := range reports {
			ef.Findings = append(ef.Findings, r.Findings...)
		}
		return ef, nil
	}
	text := func(w io.Writer, ef explainedFile) error { return writeExplanation(w, ef.in, ef.reports, ef.Breakdown) }
	return perFile(ctx, stdout, stderr, args, asJSON, analyse, text)
}

// explainInput loads, replays and explains one input, and breaks each
// traced device's memory down by category; the findings of a device
// say what its peak is made of.
func explainInput(in inputs.Input, stderr io.Writer, f *callsite.Filter) ([]*diagnose.DeviceReport, []breakdown.Report, error) {
	sn, tls, err := loadDevices(in, stderr)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*diagnose.DeviceReport, 0, len(tls))
	made := []breakdown.Report{}
	for _, tl := range tls {
		r, err := diagnose.Explain(sn, tl, f)
		if err != nil {
			return nil, nil, err
		}
		if tl.Len() > 1 {
			m := breakdown.ReadEvents(sn, tl.Device, tl.Trace, breakdown.Options{Filter: f}).Report(tl, diagnose.DetectSteps(sn, tl, f))
			m.Annotate(r.Findings)
			made = append(made, m)
		}
		out = append(out, r)
	}
	return out, made, nil
}
