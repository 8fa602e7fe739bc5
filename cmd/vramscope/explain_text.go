package main

import (
	"fmt"
	"github.com/vramscope/vramscope/breakdown"
	"io"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
)

// maxRows bounds the callsite and segment tables: the top rows explain the
// numbers, the tail is noise.
const maxRows = 5

// writeExplanation prints one input's device reports for people.
func writeExplanation(w io.Writer, in inputs.Input, reports []*diagnose.DeviceReport, made []breakdown.Report) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	name := in.Path
	if name == inputs.Stdin {
		name = "stdin"
	}
	p("%s\n", name)
	if len(reports) == 0 {
		p("  no segments and no trace events\n")
	}
	for _, r := range reports {
		p("\ndevice %d\n", r.Device)
		for _, c := range r.Caveats {
			p("  caveat: %s\n", c)
		}
		writePeak(&b, r.Peak)
		for _, m := range made {
			if m.Device == r.Device {
				b.WriteString("\n")
				writeMadeOf(&b, []breakdown.Report{m}, false)
			}
		}
		p("\n  Fragmentation\n")
		for _, fr := range r.Frag {
			writeFrag(&b, fr)
		}
		if len(r.OOMs) > 0 {
			p("\n  OOM\n")
		}
		for _, o := range r.OOMs {
			p("    event %d: %s\n", o.Index, o.Explanation())
		}
		p("\n  Findings\n")
		if len(r.Findings) == 0 {
			p("    none\n")
		}
		for _, fd := range r.Findings {
			p("    [%s] %s: %s\n", fd.Severity, fd.Kind, fd.Title)
			if fd.Callsite != nil {
				p("      at %s\n", frameText(*fd.Callsite))
			}
			for _, k := range []string{"made_of", "growing_category"} {
				if v, ok := fd.Evidence[k]; ok {
					p("      %s: %v\n", k, v)
				}
			}
			p("      fix: %s\n", fd.Fix)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func bytesOf(n int64) string { return units.Bytes(n).String() }

func writePeak(b *strings.Builder, r *diagnose.PeakReport) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("  Peak\n")
	if r == nil {
		p("    unknown: no trace, only the state at the dump (below)\n")
		return
	}
	exact := "a lower bound: recording started after the process did"
	if r.Complete {
		exact = "torch's max_memory_allocated: recording covers the whole process"
	}
	p("    %-22s%11s  at %s, in %s; %s\n", "allocated peak", bytesOf(r.Allocated.Bytes), eventName(r.Allocated.Index), r.Place, exact)
	p("    %-22s%11s  at %s, with %s allocated\n", "reserved peak", bytesOf(r.Reserved.Bytes), eventName(r.Reserved.Index), bytesOf(r.AllocatedAtReservedPeak))
	p("    %-22s%11s  allocated, %s reserved\n", "at the end", bytesOf(r.End.Allocated), bytesOf(r.End.Reserved))
	p("    %-22s%11s  outlive the trace on one side\n", "persistent at peak", bytesOf(r.PersistentBytes))
	writeGroups(b, r.Persistent)
	p("    %-22s%11s  born and freed within the trace\n", "transient at peak", bytesOf(r.TransientBytes))
	writeGroups(b, r.Transient)
	if t := r.Largest; t != nil && t.Saving(r.Allocated.Bytes) > 0 {
		p("    without the largest transient (%s from %s) the peak would be %s (-%s)\n",
			bytesOf(t.Bytes), t.Place, bytesOf(t.PeakWithout.Bytes), bytesOf(t.Saving(r.Allocated.Bytes)))
	} else if t != nil {
		p("    without the largest transient (%s from %s) the peak stays: another block reaches it\n", bytesOf(t.Bytes), t.Place)
	}
	if l := r.Line; l != nil {
		p("    without all %s from %s the peak would be %s (-%s)\n",
			units.Plural(l.Blocks, "transient block"), l.Place, bytesOf(l.PeakWithout.Bytes), bytesOf(r.Allocated.Bytes-l.PeakWithout.Bytes))
	}
}

// writeGroups prints the top callsite groups, one per row.
func writeGroups(b *strings.Builder, gs []diagnose.SiteGroup) {
	for i, g := range gs {
		if i == maxRows {
			fmt.Fprintf(b, "      ... %s more\n", units.Plural(len(gs)-maxRows, "callsite"))
			break
		}
		fmt.Fprintf(b, "      %11s  %4d  %s\n", bytesOf(g.Bytes), g.Count, g.Place)
	}
}

func writeFrag(b *strings.Builder, r *diagnose.FragReport) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	when := fmt.Sprintf("the %s (%s)", r.When, eventName(r.Index))
	if r.When == diagnose.AtDump {
		when = "the dump"
	}
	p("    at %s: %s reserved, %s allocated, %s not allocated\n",
		when, bytesOf(r.Reserved), bytesOf(r.Allocated), bytesOf(r.Unallocated()))
	p("      %-20s%11s  in %s; empty_cache() returns it\n", "fully free", bytesOf(r.FreeSegments), units.Plural(r.FreeSegmentsCount, "segment"))
	if r.FreePages > 0 {
		p("      %-20s%11s  in %s still in use; empty_cache() unmaps them\n", "whole free pages", bytesOf(r.FreePages), units.Plural(r.FreePagesCount, "expandable segment"))
	}
	p("      %-20s%11s  in %s still in use\n", "trapped", bytesOf(r.Trapped), units.Plural(r.TrappedCount, "segment"))
	if r.PendingFree > 0 {
		p("      %-20s%11s  waiting on other streams\n", "pending free", bytesOf(r.PendingFree))
	}
	if r.PrivatePools > 0 {
		p("      %-20s%11s  in private pools\n", "private pools", bytesOf(r.PrivatePools))
	}
	p("      %-20s%11s  inside allocated blocks\n", "rounding waste", bytesOf(r.RoundingWaste))
	for _, c := range r.Largest {
		p("      largest free block %s (of %s in %s) on stream %d, pool %v, %s\n",
			formatBytes(c.Largest), formatBytes(c.Free), units.Plural(c.Blocks, "block"), c.Stream, c.Pool, c.Type)
	}
	for i, s := range r.Pinned {
		if i == maxRows {
			break
		}
		p("      segment %#x (%s): %s free in %s, largest %s; pinned by\n",
			s.Address, formatBytes(s.Size), formatBytes(s.Free), units.Plural(s.Holes, "hole"), formatBytes(s.LargestHole))
		for j, g := range s.Pinners {
			if j == 2 {
				break
			}
			p("        %11s  %4d  %s\n", bytesOf(g.Bytes), g.Count, g.Place)
		}
	}
	for _, a := range r.Advice {
		p("      advice: %s\n", a)
	}
}

// eventName names an event index; the state before the first event has
// none.
func eventName(i int) string {
	if i == replay.BeforeRecording {
		return "the start"
	}
	return fmt.Sprintf("event %d", i)
}
