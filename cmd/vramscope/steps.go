package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
)

func newStepsCommand(stdout, stderr io.Writer) *cobra.Command {
	var ff filterFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "steps [--json] [--focus RE] [--ignore RE] FILE...",
		Short: "Find the iterations in a trace and the callsites whose memory grows every step",
		Long: `Steps splits each device's trace into iterations, from step=N
user_metadata (torch.cuda.memory._set_memory_metadata), record_function
annotations (ProfilerStep#N, your own "name#N", or Optimizer.step), or failing
those the repeating pattern of allocation sites. It prints the allocated bytes
at the end of every step, the live bytes per callsite across the steps, and a
leak finding for every callsite whose live bytes grow by a steady amount in
(nearly) every step after the first. The first step is set aside: weights,
optimizer state and workspaces are allocated there once.

A callsite is the first frame of your code; --focus and --ignore adjust
which frames count, as for explain.

FILE may be a snapshot (.pickle, gzip or zstd, recognized by content), "-" for
standard input, a directory (searched recursively) or a quoted glob.`,
		Example: `  vramscope steps testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			return steps(cmd.Context(), stdout, stderr, args, f, asJSON)
		},
	}
	ff.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"files":[{"path", "devices":[{"device", "steps", "allocated_bytes", "sites", "findings"}]}]}`)
	return cmd
}

// stepsFile is one input's step analysis.
type stepsFile struct {
	Path    string        `json:"path"`
	Devices []stepsDevice `json:"devices"`
}

// stepsDevice is the JSON form of a diagnose.LeakReport.
type stepsDevice struct {
	Device int            `json:"device"`
	Steps  diagnose.Steps `json:"steps"`
	// AllocatedBytes: before the first step, then at the end of each.
	AllocatedBytes []int64              `json:"allocated_bytes"`
	Sites          []stepsSite          `json:"sites"`
	Findings       []diagnose.Finding   `json:"findings"`
	Reason         string               `json:"reason,omitempty"`
	Caveats        []string             `json:"caveats"`
	report         *diagnose.LeakReport // for the text form
}

// stepsSite is the JSON form of a diagnose.SiteGrowth.
type stepsSite struct {
	Site             string          `json:"site"`
	Callsite         *diagnose.Frame `json:"callsite"`
	LiveBytes        []int64         `json:"live_bytes"`
	RequestedBytes   []int64         `json:"requested_bytes"`
	BornBytes        []int64         `json:"born_bytes"`
	AtEndBytes       int64           `json:"at_end_bytes"`
	FirstStepBytes   int64           `json:"first_step_bytes"`
	BytesPerStep     int64           `json:"bytes_per_step"`
	GrewSteps        int             `json:"grew_steps"`
	JudgedSteps      int             `json:"judged_steps"`
	RelativeSpread   float64         `json:"relative_spread"`
	ShrinkBytes      int64           `json:"shrink_bytes"`
	Leak             bool            `json:"leak"`
	RequestedPerStep int64           `json:"requested_bytes_per_step"`
}

// steps analyses every input named by args.
func steps(ctx context.Context, stdout, stderr io.Writer, args []string, f *callsite.Filter, asJSON bool) error {
	analyse := func(in inputs.Input) (stepsFile, error) { return analyzeSteps(in, stderr, f) }
	return perFile(ctx, stdout, stderr, args, asJSON, analyse, writeSteps)
}

// analyzeSteps loads one input and runs step detection and the leak
// analysis on each device that has a trace.
func analyzeSteps(in inputs.Input, stderr io.Writer, f *callsite.Filter) (stepsFile, error) {
	sn, tls, err := loadDevices(in, stderr)
	if err != nil {
		return stepsFile{}, err
	}
	sf := stepsFile{Path: in.String(), Devices: []stepsDevice{}}
	for _, tl := range tls {
		if tl.Len() == 0 {
			continue
		}
		r := diagnose.Leak(sn, tl, diagnose.DetectSteps(sn, tl, f), f)
		d := stepsDevice{
			Device: r.Device, Steps: r.Steps, AllocatedBytes: r.Allocated,
			Sites: make([]stepsSite, len(r.Sites)), Findings: r.Findings(), Reason: r.Reason,
			Caveats: make([]string, len(tl.Caveats)), report: r,
		}
		for i, c := range tl.Caveats {
			d.Caveats[i] = c.String()
		}
		for i, s := range r.Sites {
			d.Sites[i] = newStepsSite(s)
		}
		sf.Devices = append(sf.Devices, d)
	}
	return sf, nil
}

func newStepsSite(s diagnose.SiteGrowth) stepsSite {
	out := stepsSite{
		Site: s.Site.String(), LiveBytes: s.Live, RequestedBytes: s.Requested, BornBytes: s.Born,
		AtEndBytes: s.AtEnd, FirstStepBytes: s.FirstStep, BytesPerStep: s.PerStep,
		GrewSteps: s.Grew, JudgedSteps: s.Later, RelativeSpread: s.Spread, ShrinkBytes: s.Shrink,
		Leak: s.Leak, RequestedPerStep: s.RequestedPerStep,
	}
	if s.Site.Known() {
		fr := diagnose.NewFrame(s.Site.Frame)
		out.Callsite = &fr
	}
	return out
}
