package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/internal/units"
)

// writeDiff prints a comparison for people.
func writeDiff(w io.Writer, rep *diff.Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("diff at %s\n", momentPhrase(rep.At))
	for _, u := range rep.Unmatched {
		p("  left out: %s\n", u)
	}
	for _, pr := range rep.Pairs {
		p("\n")
		if pr.Name != "" {
			p("%s\n", pr.Name)
		}
		p("  A: %s%s\n", pr.A.Path, versionText(pr.A.TorchVersion))
		p("  B: %s%s\n", pr.B.Path, versionText(pr.B.TorchVersion))
		if pr.TorchVersionsDiffer {
			p("  torch versions differ: %s -> %s\n", pr.A.TorchVersion, pr.B.TorchVersion)
		}
		if len(pr.Settings) > 0 {
			p("  allocator settings that differ:\n")
			for _, s := range pr.Settings {
				p("    %s: %s -> %s\n", s.Key, orNone(s.A), orNone(s.B))
			}
		}
		if len(pr.Devices) == 0 {
			p("  neither snapshot has a device (no segments, no trace events)\n")
		}
		for _, d := range pr.Devices {
			writeDeviceDiff(&b, d, rep.Lines)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// momentPhrase is a report's moment in a sentence: "the peak", "the end",
// "the end of step 3".
func momentPhrase(at string) string {
	if strings.HasPrefix(at, "step ") {
		return "the end of " + at
	}
	return "the " + at
}

func versionText(v string) string {
	if v == "" {
		return ""
	}
	return " (torch " + v + ")"
}

func orNone(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// writeDeviceDiff prints one device's headline and callsite table.
func writeDeviceDiff(b *strings.Builder, d diff.Device, lines bool) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n  %s: %s, %s\n", deviceName(d), pointText("A", d.A), pointText("B", d.B))
	p("  %s\n", d.Summary)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t\tA\tB\tB - A\t\n")
	row := func(label string, a, bb, delta *int64) {
		cell := func(v *int64) string {
			if v == nil {
				return "-"
			}
			return units.Bytes(*v).String()
		}
		dc := "-"
		if delta != nil {
			dc = signed(*delta)
		}
		fmt.Fprintf(tw, "\t  %s\t%s\t%s\t%s\t\n", label, cell(a), cell(bb), dc)
	}
	row("allocated", &d.A.AllocatedBytes, &d.B.AllocatedBytes, &d.Delta.AllocatedBytes)
	row("reserved", &d.A.ReservedBytes, &d.B.ReservedBytes, &d.Delta.ReservedBytes)
	row("peak allocated", d.A.PeakAllocatedBytes, d.B.PeakAllocatedBytes, d.Delta.PeakAllocatedBytes)
	row("peak reserved", d.A.PeakReservedBytes, d.B.PeakReservedBytes, d.Delta.PeakReservedBytes)
	tw.Flush()
	how := "lines merged; --lines to split them"
	if lines {
		how = "by line"
	}
	for _, t := range []struct {
		table *diff.Table
		title string
	}{
		{d.Callsites, "by callsite (" + how + ")"},
		{d.Categories, "by category"},
		{d.Modules, "by module (the forward that allocated; in parentheses, the category of blocks outside one)"},
	} {
		if t.table != nil {
			p("\n  %s:\n", t.title)
			writeTable(b, *t.table)
		}
	}
}

// writeTable prints a table's rows, its rest and its unchanged rows.
func writeTable(b *strings.Builder, t diff.Table) {
	if len(t.Rows) == 0 {
		fmt.Fprintf(b, "    no difference\n")
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, r := range t.Rows {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", r.Change, units.Bytes(r.ABytes), units.Bytes(r.BBytes), signed(r.DeltaBytes), r.Name)
	}
	if t.Rest.Rows > 0 {
		fmt.Fprintf(tw, "    %d more\t%s\t%s\t%s\n", t.Rest.Rows, units.Bytes(t.Rest.ABytes), units.Bytes(t.Rest.BBytes), signed(t.Rest.DeltaBytes))
	}
	tw.Flush()
	if t.Unchanged > 0 {
		fmt.Fprintf(b, "    %s unchanged, %s on each side\n", units.Plural(t.Unchanged, "row"), units.Bytes(t.UnchangedBytes))
	}
}

// deviceName names a device pair: "cuda:0", or "cuda:0 vs cuda:3" when the
// sides are on different GPUs; a device one side lacks by the other's name.
func deviceName(d diff.Device) string {
	switch {
	case d.A.Device == d.B.Device || d.B.Device < 0:
		return fmt.Sprintf("cuda:%d", d.A.Device)
	case d.A.Device < 0:
		return fmt.Sprintf("cuda:%d", d.B.Device)
	}
	return fmt.Sprintf("cuda:%d vs cuda:%d", d.A.Device, d.B.Device)
}

// pointText names side's moment: "A at peak (event 28)".
func pointText(side string, s diff.DeviceSide) string {
	switch {
	case s.Device < 0:
		return side + " has no such device"
	case s.Event < 0:
		return side + " at " + s.Label
	}
	return fmt.Sprintf("%s at %s (event %d)", side, s.Label, s.Event)
}
