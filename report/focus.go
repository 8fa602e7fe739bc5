package report

import (
	"strings"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
)

// Focus is where the page opens a process: the snapshot and device the
// verdict comes from and, when one says more than the others, the
// allocator state shown first.
type Focus struct {
	Snapshot int `json:"snapshot"` // SnapshotView.ID
	Device   int `json:"device"`
	// State is the label of the state to show first ("oom 1", "peak"); ""
	// for the first one.
	State string `json:"state"`
}

// verdictKind is the kind of finding each verdict comes from.
var verdictKind = map[analyze.Verdict]diagnose.Kind{
	analyze.OOM: diagnose.KindOOM, analyze.Leak: diagnose.KindLeak, analyze.Fragmentation: diagnose.KindFragmentation,
}

// focusOf chooses where pr opens. The finding that decides the verdict
// (the first of its kind: findings are in rank order), or for a healthy
// process the first finding, names the device; the snapshot is the one
// that shows it: for an OOM the last with an OOM on that device, for a
// peak the one whose trace peaks highest there, else the last with the
// device. Without a finding on a device of a snapshot, the last
// snapshot's last device: the trace that reaches furthest.
func focusOf(pr *Process) *Focus {
	if len(pr.Snapshots) == 0 {
		return nil
	}
	var last *Focus
	for _, sv := range pr.Snapshots {
		if n := len(sv.Devices); n > 0 {
			last = &Focus{Snapshot: sv.ID, Device: sv.Devices[n-1].Device}
		}
	}
	f, ok := decidingFinding(pr)
	if !ok {
		return last
	}
	var best *Focus
	bestPeak := int64(-1)
	for _, sv := range pr.Snapshots {
		for _, dv := range sv.Devices {
			if dv.Device != f.Device {
				continue
			}
			switch f.Kind {
			case diagnose.KindOOM:
				if st := firstState(dv, "oom "); st != "" {
					best = &Focus{Snapshot: sv.ID, Device: dv.Device, State: st}
				}
			case diagnose.KindPeak:
				if p := dv.peak(); p >= bestPeak && firstState(dv, "peak") != "" {
					bestPeak = p
					best = &Focus{Snapshot: sv.ID, Device: dv.Device, State: "peak"}
				}
			default:
				best = &Focus{Snapshot: sv.ID, Device: dv.Device}
			}
		}
	}
	if best == nil {
		return last
	}
	return best
}

// decidingFinding is the finding the process's verdict comes from.
func decidingFinding(pr *Process) (diagnose.Finding, bool) {
	for _, f := range pr.Findings {
		if f.Kind == verdictKind[pr.Verdict] && f.Severity != diagnose.Low {
			return f, true
		}
	}
	if pr.Verdict == analyze.Healthy && len(pr.Findings) > 0 {
		return pr.Findings[0], true
	}
	return diagnose.Finding{}, false
}

// firstState is the label of dv's first state whose label starts with
// prefix, or "".
func firstState(dv DeviceView, prefix string) string {
	for _, st := range dv.States {
		if strings.HasPrefix(st.Label, prefix) {
			return st.Label
		}
	}
	return ""
}

// peak is the highest allocated bytes of dv's timeline; -1 without one.
func (dv DeviceView) peak() int64 {
	p := int64(-1)
	for _, v := range dv.Series.AllocatedMax {
		p = max(p, v)
	}
	return p
}
