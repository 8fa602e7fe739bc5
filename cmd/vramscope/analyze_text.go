package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
)

// writeAnalysis prints the report for people: the overall verdict, then
// per process its verdict, figures and findings in rank order.
func writeAnalysis(w io.Writer, rep *analyze.Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if rep.Verdict == analyze.NoVerdict {
		p("verdict: none (no input could be read)\n")
	} else {
		p("verdict: %s (%s)\n", rep.Verdict, tally(rep))
	}
	for _, pr := range rep.Processes {
		p("\n%s", pr.ID)
		if pr.Tag != "" {
			p(" (%s)", pr.Tag)
		}
		p(": %s\n", pr.Verdict)
		writeProcessFigures(&b, pr)
		writeMadeOf(&b, pr.Breakdown, len(pr.Stats.Devices) > 1)
		for _, n := range pr.Notes {
			p("  note: %s\n", n)
		}
		for i, f := range pr.Findings {
			p("\n")
			writeFinding(&b, i+1, f, findingDevice(pr, f))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeProcessFigures prints the inputs, the last totals, the trace peaks
// and the totals of each snapshot; with several devices, each device's
// own, since peaks of different devices fall at different times.
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
		if len(s.Devices) > 1 {
			fmt.Fprintf(b, " on %d devices\n", len(s.Devices))
			for _, d := range s.Devices {
				fmt.Fprintf(b, "    cuda:%d: allocated %s, reserved %s%s\n", d.Device,
					formatSize(d.AllocatedBytes), formatSize(d.ReservedBytes), peaksText(d.PeakAllocatedBytes, d.PeakReservedBytes))
			}
		} else {
			fmt.Fprintf(b, "%s\n", peaksText(s.PeakAllocatedBytes, s.PeakReservedBytes))
		}
	}
	if len(pr.Snapshots) < 2 {
		return
	}
	var at []string
	for i, pt := range pr.Snapshots {
		label := fmt.Sprintf("#%d", i+1)
		if pt.Step != nil {
			label = fmt.Sprintf("step %d", *pt.Step)
		}
		at = append(at, label)
	}
	fmt.Fprintf(b, "  snapshots: %s\n", strings.Join(at, ", "))
	if len(s.Devices) <= 1 {
		writeSeries(b, "", pr.Snapshots, func(pt analyze.Point) analyze.DeviceTotals {
			return analyze.DeviceTotals{AllocatedBytes: pt.AllocatedBytes, ReservedBytes: pt.ReservedBytes}
		})
		return
	}
	for _, d := range s.Devices {
		writeSeries(b, fmt.Sprintf("cuda:%d ", d.Device), pr.Snapshots, func(pt analyze.Point) analyze.DeviceTotals {
			for _, dt := range pt.Devices {
				if dt.Device == d.Device {
					return dt
				}
			}
			return analyze.DeviceTotals{} // the device had nothing in this snapshot
		})
	}
}

// writeSeries prints the allocated and reserved rows of the snapshots,
// taking each snapshot's totals with of.
func writeSeries(b *strings.Builder, prefix string, pts []analyze.Point, of func(analyze.Point) analyze.DeviceTotals) {
	var alloc, res []string
	for _, pt := range pts {
		t := of(pt)
		alloc = append(alloc, formatSize(t.AllocatedBytes))
		res = append(res, formatSize(t.ReservedBytes))
	}
	fmt.Fprintf(b, "    %sallocated %s\n", prefix, strings.Join(alloc, " -> "))
	fmt.Fprintf(b, "    %sreserved  %s\n", prefix, strings.Join(res, " -> "))
}

// peaksText is "; trace peaks: ..." or, without a trace, nothing.
func peaksText(alloc, res *int64) string {
	if alloc == nil || res == nil {
		return ""
	}
	return fmt.Sprintf("; trace peaks: allocated %s, reserved %s", formatSize(*alloc), formatSize(*res))
}

// writeFinding prints one finding: title, callsite and stack, evidence and
// fix. A low-severity finding is context for the verdict, not a cause, so
// it gets its title, place and fix only; --json has its evidence. device
// is the finding's device as the header names it ("cuda:1"), or empty
// when the process has one device and naming it on every line is noise.
func writeFinding(b *strings.Builder, n int, f diagnose.Finding, device string) {
	where := ""
	if device != "" {
		where = ", " + device
	}
	fmt.Fprintf(b, "  %d. [%s %s%s] %s\n", n, f.Severity, f.Kind, where, f.Title)
	low := f.Severity == diagnose.Low
	if f.Origin != nil {
		fmt.Fprintf(b, "     allocated in %s%s\n", frameText(*f.Origin), quote(*f.Origin))
	}
	switch {
	case f.Callsite != nil:
		fmt.Fprintf(b, "     at %s%s\n", frameText(*f.Callsite), quote(*f.Callsite))
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
// reason on the "at" line, the x axis in the process's snapshot list, the
// categories at the peak in made_of.
var textOmits = map[string]bool{"callsite_reason": true, "per": true, "snapshots": true, "category_bytes": true}

// findingDevice names f's device when pr spans several devices: there
// the reader must know which GPU ran out or leaks, while on the usual
// single GPU "cuda:0" on every finding would only repeat the obvious
// (--json always carries the device).
func findingDevice(pr analyze.Process, f diagnose.Finding) string {
	if len(pr.Stats.Devices) < 2 {
		return ""
	}
	return fmt.Sprintf("cuda:%d", f.Device)
}

// sources quotes the lines of findings' frames from files that exist on
// this machine; nil quotes nothing (the golden tests, whose fixtures name
// files that exist on some machines only).
var sources = &callsite.Source{}

// quote is ": `the line's text`" for a frame whose file is readable here,
// else "".
func quote(fr diagnose.Frame) string {
	if sources == nil {
		return ""
	}
	if text, ok := sources.Line(fr.File, fr.Line); ok {
		return ": `" + text + "`"
	}
	return ""
}

func frameText(fr diagnose.Frame) string {
	if fr.Line == 0 {
		return fmt.Sprintf("%s (%s)", fr.Function, fr.File)
	}
	return fmt.Sprintf("%s (%s:%d)", fr.Function, fr.File, fr.Line)
}

// evidenceText formats one evidence value; numbers under a key that
// names bytes are printed as sizes, whatever their Go type (diagnose
// writes int, int64 and uint64), so that a finding never shows
// "device_free_bytes: 80153346048" beside "allocated_bytes: 3.61 GiB";
// other fractions with three significant digits.
func evidenceText(key string, v any) string {
	sizes := strings.Contains(key, "bytes")
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if sizes {
			return formatSize(rv.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if sizes {
			return formatSize(int64(rv.Uint()))
		}
	case reflect.Float32, reflect.Float64:
		if sizes && rv.Float() == math.Trunc(rv.Float()) {
			return formatSize(int64(rv.Float()))
		}
		// Ratios and confidences: three digits say all a reader uses.
		return strconv.FormatFloat(rv.Float(), 'g', 3, 64)
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			return "none" // an empty list ("contributing: []") says so
		}
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = evidenceText(key, rv.Index(i).Interface())
		}
		return strings.Join(parts, ", ")
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		var parts []string
		for _, k := range keys {
			if k.String() == "title" { // a nested finding's title repeats the outer one
				continue
			}
			parts = append(parts, k.String()+" "+evidenceText(k.String(), rv.MapIndex(k).Interface()))
		}
		return "{" + strings.Join(parts, "; ") + "}"
	}
	return fmt.Sprint(v)
}

func formatSize(n int64) string { return units.Bytes(n).String() }

// tally counts the processes, and where there are several, how many got
// each verdict and how many out-of-memory errors they had: a folder of 50
// pasted messages is 50 OOMs, not one.
func tally(rep *analyze.Report) string {
	s := processCount(len(rep.Processes))
	if len(rep.Processes) < 2 {
		return s
	}
	counts := map[analyze.Verdict]int{}
	var order []analyze.Verdict
	ooms := 0
	for _, pr := range rep.Processes {
		if counts[pr.Verdict] == 0 {
			order = append(order, pr.Verdict)
		}
		counts[pr.Verdict]++
		for _, f := range pr.Findings {
			if f.Kind == diagnose.KindOOM {
				ooms++
			}
		}
	}
	slices.SortStableFunc(order, func(a, b analyze.Verdict) int { return counts[b] - counts[a] })
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[v], v)
	}
	s += ": " + strings.Join(parts, ", ")
	if ooms > 0 {
		s += "; " + units.Plural(ooms, "out-of-memory error")
	}
	return s
}

func processCount(n int) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}
