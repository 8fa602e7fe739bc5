package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
)

// writeAnalysis prints the report for people: the overall verdict, then
// per process its verdict, figures and findings in rank order.
func writeAnalysis(w io.Writer, rep *analyze.Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("verdict: %s (%s)\n", rep.Verdict, processCount(len(rep.Processes)))
	for _, pr := range rep.Processes {
		p("\n%s", pr.ID)
		if pr.Tag != "" {
			p(" (%s)", pr.Tag)
		}
		p(": %s\n", pr.Verdict)
		writeProcessFigures(&b, pr)
		for _, n := range pr.Notes {
			p("  note: %s\n", n)
		}
		for i, f := range pr.Findings {
			p("\n")
			writeFinding(&b, i+1, f)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeProcessFigures prints the inputs, the last totals, the trace peaks
// and the totals of each snapshot.
func writeProcessFigures(b *strings.Builder, pr analyze.Process) {
	b.WriteString("  inputs:\n")
	for _, in := range pr.Inputs {
		fmt.Fprintf(b, "    %s\n", in)
	}
	s := pr.Stats
	// Totals come from snapshots and memory logs; OOM messages alone give
	// none, and "allocated 0 B" would be a number nobody measured.
	if len(pr.Snapshots) > 0 || s.AllocatedBytes != 0 || s.ReservedBytes != 0 {
		fmt.Fprintf(b, "  last: allocated %s, reserved %s", formatSize(s.AllocatedBytes), formatSize(s.ReservedBytes))
		if s.PeakAllocatedBytes != nil {
			fmt.Fprintf(b, "; trace peaks: allocated %s, reserved %s", formatSize(*s.PeakAllocatedBytes), formatSize(*s.PeakReservedBytes))
		}
		b.WriteString("\n")
	}
	if len(pr.Snapshots) < 2 {
		return
	}
	var alloc, res, at []string
	for i, pt := range pr.Snapshots {
		alloc = append(alloc, formatSize(pt.AllocatedBytes))
		res = append(res, formatSize(pt.ReservedBytes))
		label := fmt.Sprintf("#%d", i+1)
		if pt.Step != nil {
			label = fmt.Sprintf("step %d", *pt.Step)
		}
		at = append(at, label)
	}
	fmt.Fprintf(b, "  snapshots: %s\n", strings.Join(at, ", "))
	fmt.Fprintf(b, "    allocated %s\n", strings.Join(alloc, " -> "))
	fmt.Fprintf(b, "    reserved  %s\n", strings.Join(res, " -> "))
}

// writeFinding prints one finding: title, callsite and stack, evidence and
// fix. A low-severity finding is context for the verdict, not a cause, so
// it gets its title, place and fix only; --json has its evidence.
func writeFinding(b *strings.Builder, n int, f diagnose.Finding) {
	fmt.Fprintf(b, "  %d. [%s %s] %s\n", n, f.Severity, f.Kind, f.Title)
	low := f.Severity == diagnose.Low
	switch {
	case f.Callsite != nil:
		fmt.Fprintf(b, "     at %s\n", frameText(*f.Callsite))
		for _, fr := range f.Stack {
			if fr != *f.Callsite && !low {
				fmt.Fprintf(b, "        from %s\n", frameText(fr))
			}
		}
	case f.Evidence["callsite_reason"] != nil:
		fmt.Fprintf(b, "     at: %v\n", f.Evidence["callsite_reason"])
	}
	for _, k := range slices.Sorted(maps.Keys(f.Evidence)) {
		if low {
			break
		}
		if textOmits[k] {
			continue
		}
		fmt.Fprintf(b, "     %s: %s\n", k, evidenceText(k, f.Evidence[k]))
	}
	if f.Fix != "" {
		fmt.Fprintf(b, "     fix: %s\n", f.Fix)
	}
}

// textOmits are evidence keys the text says elsewhere: the callsite
// reason on the "at" line, the x axis in the process's snapshot list.
var textOmits = map[string]bool{"callsite_reason": true, "per": true, "snapshots": true}

func frameText(fr diagnose.Frame) string {
	if fr.Line == 0 {
		return fmt.Sprintf("%s (%s)", fr.Function, fr.File)
	}
	return fmt.Sprintf("%s (%s:%d)", fr.Function, fr.File, fr.Line)
}

// evidenceText formats one evidence value; numbers under a key that
// names bytes are printed as sizes.
func evidenceText(key string, v any) string {
	sizes := strings.Contains(key, "bytes")
	switch v := v.(type) {
	case int64:
		if sizes {
			return formatSize(v)
		}
	case int:
		if sizes {
			return formatSize(int64(v))
		}
	case []int64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = evidenceText(key, x)
		}
		return strings.Join(parts, ", ")
	case []int:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = evidenceText(key, x)
		}
		return strings.Join(parts, ", ")
	case []string:
		return strings.Join(v, ", ")
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if k == "title" { // a nested finding's title repeats the outer one
				continue
			}
			parts = append(parts, k+" "+evidenceText(k, v[k]))
		}
		return "{" + strings.Join(parts, "; ") + "}"
	}
	return fmt.Sprint(v)
}

func formatSize(n int64) string { return units.Bytes(n).String() }

func processCount(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
