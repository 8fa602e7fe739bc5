package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/snapshot"
)

// viewFlags are the options report and serve share.
type viewFlags struct {
	focus, ignore string
	buckets       int
}

func (fl *viewFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.focus, "focus", "", "regexp of frames (file or function) to treat as user code")
	f.StringVar(&fl.ignore, "ignore", "", "regexp of frames to skip when naming the callsite")
	f.IntVar(&fl.buckets, "buckets", 1200, "min/max buckets per timeline (about one per pixel)")
}

// viewLoad is the outcome of loadViews.
type viewLoad struct {
	builder       *report.Builder
	payload       *report.Payload
	failed, total int
	// inconsistent is the payload's Check: what part of the page will not
	// draw, a vramscope bug; nil normally.
	inconsistent error
}

// warnInconsistent says, for report and serve alike, that the page's data
// does not fit together and the page leaves out what does not.
func warnInconsistent(stderr io.Writer, err error) {
	fmt.Fprintf(stderr, "vramscope: warning: the page's data is inconsistent (a vramscope bug, please report it); "+
		"it leaves out what does not fit:\n%v\n", err)
}

// loadViews analyzes args as analyze does and builds the report's views
// of every snapshot with the same callsite filter, so that the findings
// and the views name the same lines. keep, when not nil, also receives
// each replayed snapshot (concurrently); without it the snapshot is
// dropped once its view is built.
func loadViews(ctx context.Context, stderr io.Writer, args []string, fl viewFlags, keep func(inputs.Input, *snapshot.Snapshot, []*replay.Timeline)) (viewLoad, error) {
	filter, err := callsite.NewFilter(fl.focus, fl.ignore)
	if err != nil {
		return viewLoad{}, err
	}
	a := analyze.New(analyze.Options{Filter: filter})
	b := report.NewBuilder(report.Options{Filter: filter, Buckets: fl.buckets})
	// Without keep only the views outlive a load, as small as analyze's
	// digests: the loads run under analyze's limit (gcLimitOnly).
	gc := gcLimitOnly
	if keep != nil {
		gc = gcAsIs
	}
	failed, total, err := loadAllWith(ctx, stderr, args, a, func(in inputs.Input, sn *snapshot.Snapshot) error {
		tls, err := replay.Devices(sn)
		if err != nil {
			return fmt.Errorf("replaying: %w", err)
		}
		if err := b.AddSnapshot(in, sn, tls); err != nil {
			return err
		}
		if keep != nil {
			keep(in, sn, tls)
		}
		return nil
	}, loadOptions{gc: gc})
	if err != nil {
		return viewLoad{}, err
	}
	p := b.Finish(a.Report())
	return viewLoad{builder: b, payload: p, failed: failed, total: total, inconsistent: p.Check()}, nil
}
