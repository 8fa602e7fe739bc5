package analyze

import (
	"fmt"
	"slices"
	"sync"

	"github.com/vramscope/vramscope/breakdown"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// traceFindings runs the single-trace analyses of package diagnose (peak,
// fragmentation, OOM, and leaks between the steps inside the trace) on
// every device of one snapshot; steps holds each traced device's steps,
// events what the breakdown read of its trace (by device: every device
// with events has been read).
func (a *Analyzer) traceFindings(sn *snapshot.Snapshot, tls []*replay.Timeline, steps map[int]diagnose.Steps, events []*breakdown.Events, advised []diagnose.Kind) ([]diagnose.Finding, []breakdown.Report, []string) {
	out := []diagnose.Finding{}
	var reports []breakdown.Report
	var notes []string
	for _, tl := range tls {
		if tl.Len() == 0 {
			continue
		}
		if s := steps[tl.Device]; s.OnePass {
			notes = append(notes, fmt.Sprintf("device %d: %s", tl.Device, s.Reason))
		}
		// Explain and Leak only read the timeline: they run side by side.
		// So does the breakdown, which says what the peak and the growth
		// are made of.
		var leaks []diagnose.Finding
		var made breakdown.Report
		var wg sync.WaitGroup
		wg.Go(func() { leaks = diagnose.Leak(sn, tl, steps[tl.Device], a.filter).Findings() })
		wg.Go(func() { made = events[tl.Device].Report(tl, steps[tl.Device]) })
		r, err := diagnose.ExplainAdvising(sn, tl, a.filter, advised...)
		wg.Wait()
		if err != nil {
			notes = append(notes, fmt.Sprintf("device %d: trace analysis failed: %v", tl.Device, err))
			continue
		}
		fs := append(slices.Clone(r.Findings), leaks...)
		made.Annotate(fs)
		out = append(out, fs...)
		reports = append(reports, made)
	}
	return out, reports, notes
}

// mergeTraceFindings adds what the snapshots' own traces found to the
// findings from comparing them. With one snapshot its trace is all there
// is. With several, the comparison at step boundaries decides leaks and
// fragmentation, and the traces add: the peak of the snapshot whose trace
// peaked highest, every OOM, and, on a leak the comparison found, the
// per-step growth inside the last trace as confirmation.
func mergeTraceFindings(fs []diagnose.Finding, snaps []*digest) []diagnose.Finding {
	switch len(snaps) {
	case 0:
		return fs
	case 1:
		for _, f := range snaps[0].findings {
			if f.Kind == diagnose.KindFragmentation && f.Severity != diagnose.Low {
				// One trace shows the cache at one moment; a fragmentation
				// verdict needs reserved memory that keeps growing (or the
				// OOM it ends in, which is its own finding).
				f.Severity = diagnose.Low
				f.Evidence["severity_note"] = oneMomentNote
			}
			fs = append(fs, f)
		}
		return fs
	}
	// The last of equal peaks: its trace covers the most of the run.
	highest := snaps[0]
	for _, d := range snaps[1:] {
		if peakOf(d) >= peakOf(highest) {
			highest = d
		}
	}
	for _, f := range highest.findings {
		if f.Kind == diagnose.KindPeak {
			fs = append(fs, f)
		}
	}
	seen := map[string]bool{}
	for _, d := range snaps {
		for _, f := range d.findings {
			if f.Kind == diagnose.KindOOM && !seen[f.Title] {
				seen[f.Title] = true
				fs = append(fs, f)
			}
		}
	}
	for _, tf := range snaps[len(snaps)-1].findings {
		if tf.Kind != diagnose.KindLeak || tf.Callsite == nil {
			continue
		}
		for i := range fs {
			f := &fs[i]
			if f.Kind == diagnose.KindLeak && f.Callsite != nil && *f.Callsite == *tf.Callsite && f.Device == tf.Device {
				f.Evidence["trace_confirms"] = map[string]any{"bytes_per_step": tf.BytesPerStep, "title": tf.Title}
			}
		}
	}
	return fs
}

const oneMomentNote = "lowered to low: one snapshot shows the cache at one moment, and fragmentation is a verdict " +
	"only when reserved memory grows across snapshots or log samples"

func peakOf(d *digest) int64 {
	var p int64
	for _, dd := range d.devices {
		p += dd.peakAllocated
	}
	return p
}
