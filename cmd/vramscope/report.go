package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/report/page"
)

func newReportCommand(stderr io.Writer) *cobra.Command {
	var fl viewFlags
	var out string
	cmd := &cobra.Command{
		Use:   "report [flags] PATH... -o report.html",
		Short: "Write one self-contained HTML file: verdict, findings, timelines, allocator states, flame graphs",
		Long: `Report reads what analyze reads and writes a single HTML file that opens
offline in any browser (scripts and data are inlined): the verdict and
findings of each process; per snapshot and device the allocated and
reserved bytes over time (min/max per pixel, so no spike is lost) with
steps, snapshot() calls, OOMs and the peak marked; the allocator state
(segments as rows, blocks coloured by callsite, free holes visible) at the
peak, at the end and at each OOM; flame graphs of the live bytes at the end
and at the peak, and of what leaking callsites hold; and the bytes of each
callsite across snapshots.

For any moment of the timeline, and to compare two snapshots, use
vramscope serve.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.Context(), stderr, args, out, fl)
		},
	}
	fl.register(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "vramscope-report.html", "write the report to `FILE`")
	return cmd
}

func runReport(ctx context.Context, stderr io.Writer, args []string, out string, fl viewFlags) error {
	vl, err := loadViews(ctx, stderr, args, fl, nil)
	if err != nil {
		return err
	}
	err = writeFile(out, func(w io.Writer) error { return page.Write(w, "vramscope report", vl.payload) })
	if err != nil {
		return err
	}
	size := int64(-1)
	if info, err := os.Stat(out); err == nil {
		size = info.Size()
	}
	if vl.inconsistent != nil {
		// Instead of success: part of the page will be missing.
		warnInconsistent(stderr, vl.inconsistent)
	} else {
		fmt.Fprintf(stderr, "vramscope: wrote %s (%s): verdict %s, processes: %d\n",
			out, units.Bytes(size), vl.payload.Verdict, len(vl.payload.Processes))
	}
	if vl.failed > 0 {
		return &inputError{msg: fmt.Sprintf("%d of %d inputs could not be read", vl.failed, vl.total)}
	}
	return nil
}
