package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// minPeakSaving is the share of the peak that a what-if must save to be
// advice: trimming a block that lowers 32 GiB by 5 MiB, or by nothing
// because the next layer's block of the same size reaches the same peak,
// is no fix.
const minPeakSaving = 0.01

// lowers reports whether a what-if that leaves the peak at without instead
// of peak saves enough to be advice.
func lowers(peak, without int64) bool {
	return float64(peak-without) >= minPeakSaving*float64(peak)
}

// maxPeakHolders is how many persistent callsites a peak finding names.
const maxPeakHolders = 3

// Findings returns the peak finding. Where removing the largest transient
// block lowers the peak, it is that block and its gain, blamed on its
// callsite; failing that, the line of code whose transient blocks, all
// removed, lower it; otherwise the peak is set by the blocks that stay
// allocated, and the finding names them instead.
func (r *PeakReport) Findings() []Finding {
	if r.Allocated.Bytes <= 0 {
		return nil
	}
	var fd Finding
	switch {
	case r.Cause != nil && r.Cause.Name == CauseOptimizerForeach:
		fd = r.lineFinding(r.Line)
	case r.Largest != nil && lowers(r.Allocated.Bytes, r.Largest.PeakWithout.Bytes):
		fd = r.transientFinding(r.Largest)
	case r.Line != nil && lowers(r.Allocated.Bytes, r.Line.PeakWithout.Bytes):
		fd = r.lineFinding(r.Line)
	case len(r.Persistent) > 0:
		fd = r.persistentFinding()
	default:
		return nil
	}
	if c := r.Cause; c != nil {
		// The what-if stays, unless the cause has its own: it says how
		// much the fix is worth.
		whatIf := fd.Fix
		if c.Effect != "" {
			whatIf = c.Effect
		}
		c.apply(&fd)
		fd.Fix += " " + whatIf
	}
	return []Finding{fd}
}

// evidence is what every peak finding quotes.
func (r *PeakReport) evidence() map[string]any {
	return map[string]any{
		"peak_allocated_bytes": r.Allocated.Bytes,
		"peak_event":           r.Allocated.Index,
		"peak_reserved_bytes":  r.Reserved.Bytes,
		"persistent_bytes":     r.PersistentBytes,
		"transient_bytes":      r.TransientBytes,
		"recording_from_start": r.Complete,
		"transient_callsites":  len(r.Transient),
		"persistent_callsites": len(r.Persistent),
		"end_allocated_bytes":  r.End.Allocated,
		"peak_callsite":        r.Place.String(),
	}
}

// transientFinding is the peak finding of a transient block whose removal
// lowers the peak.
func (r *PeakReport) transientFinding(t *Transient) Finding {
	saving := t.Saving(r.Allocated.Bytes)
	share := float64(saving) / float64(r.Allocated.Bytes)
	ev := r.evidence()
	ev["largest_transient_bytes"] = t.Bytes
	ev["peak_without_largest_bytes"] = t.PeakWithout.Bytes
	ev["saving_bytes"] = saving
	ev["largest_requested_bytes"] = t.Requested
	ev["largest_alloc_index"] = t.Alloc
	ev["largest_transient_pct"] = int(share*100 + 0.5)
	fd := Finding{
		Kind:     KindPeak,
		Severity: gradeShare(share, saving, 0.25, 0.10),
		Title: fmt.Sprintf("allocated memory peaks at %s; a transient %s block from %s sits on top of it",
			units.Bytes(r.Allocated.Bytes), units.Bytes(t.Bytes), t.Place),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: fmt.Sprintf("%s allocates %s that is freed again before the end; %s lowers the peak from %s to %s (-%s)",
			t.Place, units.Bytes(t.Bytes), trimming(t.Place, false), units.Bytes(r.Allocated.Bytes), units.Bytes(t.PeakWithout.Bytes), units.Bytes(saving)),
	}
	placeFinding(&fd, t.Place, t.Stack)
	return fd
}

// lineFinding is the peak finding of a line of code whose transient blocks
// take turns at the peak: removing the largest one saves little, removing
// them all saves more.
func (r *PeakReport) lineFinding(l *TransientLine) Finding {
	saving := r.Allocated.Bytes - l.PeakWithout.Bytes
	share := float64(saving) / float64(r.Allocated.Bytes)
	ev := r.evidence()
	ev["line_transient_bytes_at_peak"] = l.Bytes
	ev["line_transient_blocks"] = l.Blocks
	ev["peak_without_line_bytes"] = l.PeakWithout.Bytes
	ev["saving_bytes"] = saving
	ev["largest_transient_bytes"] = r.Largest.Bytes
	ev["peak_without_largest_bytes"] = r.Largest.PeakWithout.Bytes
	fd := Finding{
		Kind:     KindPeak,
		Severity: gradeShare(share, saving, 0.25, 0.10),
		Title: fmt.Sprintf("allocated memory peaks at %s; transient blocks from %s (%s at the peak) sit on top of it",
			units.Bytes(r.Allocated.Bytes), l.Place, units.Bytes(l.Bytes)),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: fmt.Sprintf("%s allocates %s that %s freed again before the end; removing only the largest barely moves the peak, since the next one reaches it again, "+
			"but %s lowers the peak from %s to %s (-%s)",
			l.Place, units.Plural(l.Blocks, "block"), isAre(l.Blocks), trimming(l.Place, true), units.Bytes(r.Allocated.Bytes), units.Bytes(l.PeakWithout.Bytes), units.Bytes(saving)),
	}
	placeFinding(&fd, l.Place, l.Stack)
	return fd
}

// trimming is how transient blocks from a place are avoided, for "…
// lowers the peak": computed in chunks, or, for the autograd engine's
// gradients, which are the size of what the forward computed, a smaller
// batch or a chunked loss.
func trimming(p Place, plural bool) string {
	switch {
	case p.Backward != nil:
		return "a smaller batch, or a loss computed in chunks (the engine makes a gradient the size of each tensor it differentiates),"
	case plural:
		return "computing them in chunks, or freeing what they replace before they are created,"
	}
	return "computing it in chunks, or freeing what it replaces before it is created,"
}

// isAre agrees a verb with a count.
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// persistentFinding is the peak finding when no transient block sets the
// peak: it names the callsites of the blocks that outlive the trace, which
// make it up, blamed on the largest of them with a user frame.
func (r *PeakReport) persistentFinding() Finding {
	holders := r.Persistent[:min(len(r.Persistent), maxPeakHolders)]
	blame := r.Persistent[0]
	for _, g := range r.Persistent {
		if g.Site.Known() {
			blame = g
			break
		}
	}
	names := make([]string, len(holders))
	for i, g := range holders {
		names[i] = fmt.Sprintf("%s from %s", units.Bytes(g.Bytes), g.Place)
	}
	trim := "No block freed within the trace is part of the peak. "
	ev := r.evidence()
	if t := r.Largest; t != nil {
		after := "stays at " + units.Bytes(t.PeakWithout.Bytes).String()
		if t.PeakWithout.Bytes < r.Allocated.Bytes {
			after = "drops only to " + units.Bytes(t.PeakWithout.Bytes).String()
		}
		trim = fmt.Sprintf("Trimming what is freed within the trace does not lower it: without the largest such block (%s from %s) the peak %s. ",
			units.Bytes(t.Bytes), t.Place, after)
		ev["largest_transient_bytes"] = t.Bytes
		ev["peak_without_largest_bytes"] = t.PeakWithout.Bytes
		ev["saving_bytes"] = t.Saving(r.Allocated.Bytes)
	}
	ev["largest_persistent_bytes"] = blame.Bytes
	ev["largest_persistent_blocks"] = blame.Count
	fd := Finding{
		Kind:     KindPeak,
		Severity: Low,
		Title: fmt.Sprintf("allocated memory peaks at %s, %s of it in blocks that stay allocated; %s holds %s of them",
			units.Bytes(r.Allocated.Bytes), units.Bytes(r.PersistentBytes), blame.Place, units.Bytes(blame.Bytes)),
		Bytes:    r.Allocated.Bytes,
		Device:   r.Device,
		Evidence: ev,
		Fix: trim + fmt.Sprintf("The peak is what stays allocated (from before the trace began, or to its end): %s. "+
			"To lower it, hold less of that at once: drop references to what is no longer needed before this point, keep it in a lower precision, or shard or offload it; "+
			"activations kept for backward shrink with activation checkpointing (torch.utils.checkpoint) or a smaller batch.",
			strings.Join(names, ", ")),
	}
	placeFinding(&fd, blame.Place, blame.Stack)
	return fd
}
