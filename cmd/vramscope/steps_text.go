package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
)

const (
	// stepColumns is how many callsites get a column in the step table:
	// the leaks, then the largest; --json has them all.
	stepColumns = 4
	// stepRowsEnds: a long run prints its first and last steps only.
	stepRowsEnds = 5
)

// writeSteps prints one file's step analysis for people.
func writeSteps(w io.Writer, sf stepsFile) error {
	var b strings.Builder
	name := sf.Path
	if name == inputs.Stdin {
		name = "stdin"
	}
	fmt.Fprintf(&b, "%s\n", name)
	if len(sf.Devices) == 0 {
		b.WriteString("  no trace events\n")
	}
	for _, d := range sf.Devices {
		r := d.report
		if len(r.Steps.Steps) == 0 {
			fmt.Fprintf(&b, "\ndevice %d: no steps\n  %s\n", d.Device, r.Steps.Reason)
		} else {
			fmt.Fprintf(&b, "\ndevice %d: %s from %s %s\n  %s\n", d.Device, units.Plural(len(r.Steps.Steps), "step"), r.Steps.Source, r.Steps.Marker, r.Steps.Reason)
		}
		for _, c := range d.Caveats {
			fmt.Fprintf(&b, "  caveat: %s\n", c)
		}
		if len(r.Steps.Steps) > 0 {
			b.WriteString("\n")
			if err := writeStepTable(&b, r); err != nil {
				return err
			}
		}
		b.WriteString("\n")
		if len(d.Findings) == 0 {
			reason := r.Reason
			if reason == "" {
				reason = "no callsite grew by a steady amount in (nearly) every step after the first"
			}
			fmt.Fprintf(&b, "  no leak: %s\n", reason)
		}
		for i, f := range d.Findings {
			if i > 0 {
				b.WriteString("\n")
			}
			writeLeakFinding(&b, f)
		}
	}
	// Table rows end in padding where a cell is empty; trim it.
	out := b.String()
	for strings.Contains(out, " \n") {
		out = strings.ReplaceAll(out, " \n", "\n")
	}
	_, err := io.WriteString(w, out)
	return err
}

// writeStepTable prints one row per step boundary: the step's events, the
// device's allocated bytes at its end and their change, and the live bytes
// of the top callsites, which a legend below names.
func writeStepTable(b *strings.Builder, r *diagnose.LeakReport) error {
	sites := r.Sites[:min(len(r.Sites), stepColumns)]
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  step\tevents\tallocated\tchange\t")
	for i := range sites {
		fmt.Fprintf(tw, "[%d]\t", i+1)
	}
	fmt.Fprint(tw, "\n")
	row := func(label, events string, k int) {
		change := ""
		if k > 0 {
			change = signedSize(r.Allocated[k] - r.Allocated[k-1])
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t", label, events, bytesOf(r.Allocated[k]), change)
		for _, s := range sites {
			fmt.Fprintf(tw, "%s\t", bytesOf(s.Live[k]))
		}
		fmt.Fprint(tw, "\n")
	}
	row("before", "", 0)
	steps := r.Steps.Steps
	for i, s := range steps {
		if len(steps) > 2*stepRowsEnds+1 && i == stepRowsEnds {
			fmt.Fprintf(tw, "  … %d more steps\t\t\t\t\n", len(steps)-2*stepRowsEnds)
		}
		if len(steps) > 2*stepRowsEnds+1 && i >= stepRowsEnds && i < len(steps)-stepRowsEnds {
			continue
		}
		row(s.Label, fmt.Sprint(s.End-s.First), i+1)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, s := range sites {
		verdict := "no leak"
		if s.Leak {
			verdict = "leak"
		}
		fmt.Fprintf(b, "  [%d] %s: %s; %s at the end, first step %s, then %s per step (median), grew in %d of %d later steps, spread %.2f\n",
			i+1, s.Site, verdict, bytesOf(s.AtEnd), signedSize(s.FirstStep), signedSize(s.PerStep), s.Grew, s.Later, s.Spread)
	}
	return nil
}

// writeLeakFinding prints a leak finding: its title, the callsite and the
// user frames that called it, the numbers that make the case and the fix.
func writeLeakFinding(b *strings.Builder, f diagnose.Finding) {
	fmt.Fprintf(b, "  [%s] %s: %s\n", f.Severity, f.Kind, f.Title)
	if f.Callsite == nil {
		fmt.Fprintf(b, "    at: %v\n", f.Evidence["callsite_reason"])
	}
	for i, fr := range f.Stack {
		verb := "from"
		if i == 0 {
			verb = "at"
		}
		fmt.Fprintf(b, "    %s %s\n", verb, frameText(fr))
	}
	// Evidence is an open map: checked assertions print what is there
	// rather than panic on a finding built with other types.
	if perStep, ok := f.Evidence["live_bytes_per_step"].([]int64); ok {
		live := make([]string, len(perStep))
		for i, n := range perStep {
			live[i] = bytesOf(n)
		}
		fmt.Fprintf(b, "    live before the first step and at each step's end: %s\n", strings.Join(live, ", "))
	}
	grew, okGrew := f.Evidence["grew_steps"].(int)
	judged, okJudged := f.Evidence["judged_steps"].(int)
	spread, okSpread := f.Evidence["relative_spread"].(float64)
	if okGrew && okJudged && okSpread {
		fmt.Fprintf(b, "    grew in %d of %d steps after the first, spread %.2f;", grew, judged, spread)
	}
	if req, ok := f.Evidence["requested_bytes_per_step"].(int64); ok {
		fmt.Fprintf(b, " %s requested per step,", bytesOf(req))
	}
	fmt.Fprintf(b, " %s allocated at the end\n", bytesOf(f.Bytes))
	fmt.Fprintf(b, "    fix: %s\n", f.Fix)
}

// signedSize prints a change of size with its sign ("+38.00 MiB", "0 B").
func signedSize(n int64) string {
	if n > 0 {
		return "+" + bytesOf(n)
	}
	return bytesOf(n)
}
