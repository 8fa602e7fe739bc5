package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
	"github.com/vramscope/vramscope/summary"
)

// writeText prints one file's stats for people.
func writeText(w io.Writer, fs fileStats) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	// row prints a labelled byte figure with the figures right-aligned.
	row := func(label string, n uint64, note string, args ...any) {
		p("  %-19s%11s  %s\n", label, formatBytes(n), fmt.Sprintf(note, args...))
	}

	name := fs.Path
	if name == inputs.Stdin {
		name = "stdin"
	}
	p("%s\n", name)
	p("  format %s, pickle protocol %d%s\n", fs.Format, fs.Protocol, identityText(fs))
	writeCaveats(&b, fs.Caveats)
	if len(fs.Devices) == 0 {
		p("  no segments and no trace events\n")
	}
	for _, d := range fs.Devices {
		p("\ndevice %d\n", d.Device)
		row("reserved", d.ReservedBytes, "in %s, %d fully free", units.Plural(d.Segments, "segment"), d.FreeSegments)
		row("allocated", d.AllocatedBytes, "in %s", units.Plural(d.AllocatedBlocks, "block"))
		row("active", d.ActiveBytes, "allocated + %s pending free in %s", formatBytes(d.ActiveBytes-d.AllocatedBytes), units.Plural(d.PendingFreeBlocks, "block"))
		row("requested", d.RequestedBytes, "asked for by the callers of active blocks")
		row("internal waste", d.InternalWasteBytes, "rounding inside allocated blocks")
		row("free", d.FreeBytes(), "in %s", units.Plural(d.FreeBlocks, "block"))
		row("  in used segments", d.FreeInUsedSegmentsBytes, "empty_cache() cannot release it")
		row("  in free segments", d.FreeSegmentBytes, "empty_cache() can release it")
		row("largest free block", d.LargestFreeBlockBytes, "")
		p("  %-19s%11d  %s\n", "trace events", d.TraceEvents, spanText(d))
		if d.TraceEvents > 0 {
			p("  %-19s%11s  %s\n", "", "", eventsText(d.Events))
		}
		if len(d.Pools) > 0 {
			p("\n")
			if err := writePools(&b, d.Pools); err != nil {
				return err
			}
		}
		if len(d.Caveats) > 0 {
			p("\n")
		}
		writeCaveats(&b, d.Caveats)
	}
	// Rows end in padding only when a note is empty; trim it.
	out := b.String()
	for strings.Contains(out, " \n") {
		out = strings.ReplaceAll(out, " \n", "\n")
	}
	_, err := io.WriteString(w, out)
	return err
}

// writePools prints one row per pool, numbers right-aligned.
func writePools(w io.Writer, pools []summary.Pool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  pool\tstream\tclass\tsegments\tblocks\treserved\tallocated\tactive\trequested\twaste\tfree in used\tfree segments\tlargest free\t\n")
	for _, pl := range pools {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			pl.ID, streamText(pl.Stream), pl.Type, pl.Segments, pl.Blocks,
			formatBytes(pl.ReservedBytes), formatBytes(pl.AllocatedBytes), formatBytes(pl.ActiveBytes),
			formatBytes(pl.RequestedBytes), formatBytes(pl.InternalWasteBytes),
			formatBytes(pl.FreeInUsedSegmentsBytes), formatBytes(pl.FreeSegmentBytes), formatBytes(pl.LargestFreeBlockBytes))
	}
	return tw.Flush()
}

func writeCaveats(w io.Writer, caveats []summary.Caveat) {
	for _, c := range caveats {
		fmt.Fprintf(w, "  caveat (%s): %s", c.Kind, c.Message)
		if c.Bytes > 0 {
			fmt.Fprintf(w, " [%s]", formatBytes(c.Bytes))
		}
		fmt.Fprintln(w)
	}
}

// identityText is what the path said about the process, e.g.
// ", tag actor, rank 0, pid 746, step 2".
func identityText(fs fileStats) string {
	var b strings.Builder
	if fs.Tag != "" {
		fmt.Fprintf(&b, ", tag %s", fs.Tag)
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"rank", fs.Rank}, {"pid", fs.PID}, {"step", fs.Step}} {
		if f.v != nil {
			fmt.Fprintf(&b, ", %s %d", f.name, *f.v)
		}
	}
	if fs.DumpTime != nil {
		fmt.Fprintf(&b, ", dumped %s", fs.DumpTime.Format("2006-01-02 15:04"))
	}
	return b.String()
}

// spanText says when the trace starts and ends. Times are printed in UTC
// so that reports do not depend on where they are made.
func spanText(d summary.Device) string {
	if d.FirstEventUS == 0 {
		return ""
	}
	const layout = "2006-01-02 15:04:05.000000"
	first := time.UnixMicro(d.FirstEventUS).UTC()
	last := time.UnixMicro(d.LastEventUS).UTC()
	return fmt.Sprintf("over %s, %s to %s UTC", d.Span(), first.Format(layout), last.Format(layout))
}

// eventsText lists the non-zero event counts in lifecycle order.
func eventsText(c summary.EventCounts) string {
	var parts []string
	for _, a := range snapshot.Actions() {
		if n := c[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	return strings.Join(parts, ", ")
}

// streamText prints the default stream as 0 and others, which are
// cudaStream_t pointers, in hex.
func streamText(raw int64) string {
	if raw == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(uint64(raw), 16)
}

// formatBytes prints a byte count the way every vramscope report does.
func formatBytes(b uint64) string { return units.Bytes(b).String() }
