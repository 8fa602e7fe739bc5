package diagnose

import (
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// DeviceReport gathers the peak, fragmentation and OOM analyses of one
// device, for front ends that print them all.
type DeviceReport struct {
	Device int
	// Peak is nil for a device without a trace.
	Peak *PeakReport
	// Frag is the fragmentation at the end, at the allocated peak and at
	// the reserved peak (each moment once, in that order).
	Frag     []*FragReport
	OOMs     []*OOMReport
	Caveats  []replay.Caveat
	Findings []Finding
}

// AtDump is the moment of a FragReport of a device without a trace: the
// dump, the one moment known.
const AtDump = "dump"

// Explain runs every analysis of this package on one device's timeline.
func Explain(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) (*DeviceReport, error) {
	return ExplainAdvising(sn, tl, f, KindOOM, KindFragmentation)
}

// ExplainAdvising is Explain with the allocator model's advice (Advice) on
// the findings of the kinds advised alone. analyze, which keeps only the
// OOM findings of each trace of a process that has several snapshots,
// asks for no more: on the bench seed's 52 MB trace the advice of its
// fragmentation finding, a dozen simulated replays, cost twice the rest of
// the analysis.
func ExplainAdvising(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, advised ...Kind) (*DeviceReport, error) {
	if tl.Len() == 0 {
		// Without a trace only the dump is known: no peak and no history
		// to judge, so no findings, as analyze has none for it; the state
		// at the dump is still worth reading.
		end, err := Frag(sn, tl, f, replay.BeforeRecording, AtDump)
		if err != nil {
			return nil, err
		}
		return &DeviceReport{Device: tl.Device, Frag: []*FragReport{end}, Caveats: tl.Caveats}, nil
	}
	r, err := explainPeak(sn, tl, f)
	if err != nil {
		return nil, err
	}
	if r.OOMs, err = explainOOMs(sn, tl, f, oomEvents(tl.Trace)); err != nil {
		return nil, err
	}
	for _, o := range r.OOMs {
		r.Findings = append(r.Findings, o.Findings()...)
	}
	r.Findings = append(r.Findings, r.Peak.Findings()...)
	r.Findings = append(r.Findings, FragFinding(r.Peak, r.Frag[0], r.Frag[1:]...)...)
	simulateAdvice(sn, tl, f, r.Findings, advised)
	return r, nil
}

// explainPeak starts Explain's report with the peak and the fragmentation
// at the end and at both peaks.
func explainPeak(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) (*DeviceReport, error) {
	r := &DeviceReport{Device: tl.Device, Peak: Peak(sn, tl, f), Caveats: tl.Caveats}
	moments := []struct {
		when  string
		index int
	}{
		{"end", tl.Len() - 1},
		{"peak", r.Peak.Allocated.Index},
		{"reserved peak", r.Peak.Reserved.Index},
	}
	seen := map[int]bool{}
	for _, m := range moments {
		if seen[m.index] {
			continue
		}
		seen[m.index] = true
		fr, err := Frag(sn, tl, f, m.index, m.when)
		if err != nil {
			return nil, err
		}
		r.Frag = append(r.Frag, fr)
	}
	return r, nil
}
