package analyze

import (
	"fmt"
	"github.com/vramscope/vramscope/breakdown"
	"slices"
	"strings"
	"time"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/trend"
)

// axis is the x of a process's snapshot series: the step numbers when
// every snapshot has a distinct one of one unit; else, when each sits in a
// dump folder of its own time (verl's MemorySnapshotSampler writes
// mem_snapshots/20250601-1200/), the dumps in time order; else the
// snapshots' positions.
type axis struct {
	xs []float64
	// per is the unit of bytes_per_step: the steps' unit ("step",
	// "request", "iteration", "epoch"), "dump" or "snapshot".
	per string
	// steps are the step numbers, or nil.
	steps []int
	// times are the dump folders' times, or nil.
	times []time.Time
}

func axisOf(snaps []*digest) axis {
	if steps := distinctSteps(snaps); steps != nil {
		ax := axis{per: snaps[0].in.StepUnit, steps: steps}
		for _, s := range steps {
			ax.xs = append(ax.xs, float64(s))
		}
		return ax
	}
	ax := axis{per: "snapshot", times: dumpTimes(snaps)}
	if ax.times != nil {
		ax.per = "dump"
	}
	for i := range snaps {
		ax.xs = append(ax.xs, float64(i))
	}
	return ax
}

// dumpTimes returns the snapshots' dump folder times when each has one and
// they rise strictly (the snapshots are ordered by them); else nil.
func dumpTimes(snaps []*digest) []time.Time {
	var ts []time.Time
	for i, d := range snaps {
		if !d.in.HasTime || i > 0 && !d.in.Time.After(ts[i-1]) {
			return nil
		}
		ts = append(ts, d.in.Time)
	}
	return ts
}

// hours are the dumps' times in hours since the first, or nil when the
// axis has no times.
func (ax axis) hours() []float64 {
	if ax.times == nil {
		return nil
	}
	hs := make([]float64, len(ax.times))
	for i, t := range ax.times {
		hs[i] = t.Sub(ax.times[0]).Hours()
	}
	return hs
}

// perHour is the growth of ys per hour of dump time, and whether the axis
// can tell it.
func (ax axis) perHour(ys []int64) (float64, bool) {
	hs := ax.hours()
	if len(hs) < 2 {
		return 0, false
	}
	return trend.TheilSen(hs, ys), true
}

// distinctSteps returns the snapshots' step numbers when each has one, all
// of one unit and no two equal; else nil.
func distinctSteps(snaps []*digest) []int {
	var steps []int
	for _, d := range snaps {
		if !d.in.HasStep || slices.Contains(steps, d.in.Step) || d.in.StepUnit != snaps[0].in.StepUnit {
			return nil
		}
		steps = append(steps, d.in.Step)
	}
	return steps
}

// evidence starts a finding's evidence with the series' x values.
func (ax axis) evidence() map[string]any {
	ev := map[string]any{"per": ax.per, "snapshots": len(ax.xs)}
	if ax.steps != nil {
		ev["steps"] = ax.steps
	}
	if ax.times != nil {
		at := make([]string, len(ax.times))
		for i, t := range ax.times {
			at[i] = t.Format("2006-01-02 15:04:05")
		}
		ev["dumped_at"] = at
	}
	return ev
}

// analyzeProcess compares a process's snapshots with one another, reads
// its logs and merges the findings of its traces.
func (a *Analyzer) analyzeProcess(g *processGroup) Process {
	p := Process{
		ID: g.id, Rank: g.rank, PID: g.pid, Tag: strings.Join(g.tags, ","),
		Inputs: []string{}, Findings: []diagnose.Finding{}, Snapshots: []Point{}, Notes: []string{},
		Breakdown: []breakdown.Report{},
	}
	for _, d := range g.snaps {
		if len(d.made) > 0 {
			p.Breakdown = d.made
		}
		p.Inputs = append(p.Inputs, d.in.Path)
		p.Snapshots = append(p.Snapshots, pointOf(d))
		p.Notes = append(p.Notes, d.notes...)
	}
	for _, t := range g.texts {
		p.Inputs = append(p.Inputs, t.in.Path)
		p.Notes = append(p.Notes, t.notes...)
		p.PoolCharts = append(p.PoolCharts, t.poolCharts...)
	}
	p.Stats = statsOf(g)

	switch len(g.snaps) {
	case 0:
	case 1:
		p.Notes = append(p.Notes, "one snapshot: growth between snapshots needs two or more (three to tell a leak from a one-off allocation); a leak can only come from the steps inside its trace")
	default:
		ax := axisOf(g.snaps)
		for _, dev := range devicesOf(g.snaps) {
			series := deviceSeries(g.snaps, dev)
			p.Findings = append(p.Findings, a.snapshotLeaks(ax, dev, series)...)
			if f, ok := a.snapshotFragmentation(ax, dev, series); ok {
				p.Findings = append(p.Findings, f)
			}
		}
	}
	p.Findings = mergeTraceFindings(p.Findings, g.snaps)
	// Leaks found between snapshots get the category that grows inside
	// the last trace.
	for _, r := range p.Breakdown {
		r.Annotate(p.Findings)
	}
	p.Findings, p.Notes = mergeTextFindings(p.Findings, p.Notes, g.texts)

	sortFindings(p.Findings)
	p.Verdict = verdictOf(p.Findings)
	return p
}

func pointOf(d *digest) Point {
	pt := Point{Input: d.in.Path, Devices: []DeviceTotals{}}
	if d.in.HasStep {
		step := d.in.Step
		pt.Step = &step
	}
	for _, dd := range d.devices {
		pt.AllocatedBytes += dd.allocated
		pt.ReservedBytes += dd.reserved
		pt.Devices = append(pt.Devices, DeviceTotals{Device: dd.device, AllocatedBytes: dd.allocated, ReservedBytes: dd.reserved})
	}
	return pt
}

// statsOf takes the last snapshot's totals, or the last log sample's, and
// each device's highest trace peaks across the snapshots.
func statsOf(g *processGroup) Stats {
	s := Stats{Devices: []DeviceStats{}}
	if n := len(g.snaps); n > 0 {
		last := pointOf(g.snaps[n-1])
		s.AllocatedBytes, s.ReservedBytes = last.AllocatedBytes, last.ReservedBytes
	} else {
		for _, t := range g.texts {
			if n := len(t.points); n > 0 {
				s.AllocatedBytes, s.ReservedBytes = t.points[n-1].allocated, t.points[n-1].reserved
			}
		}
	}
	for _, dev := range devicesOf(g.snaps) {
		series := deviceSeries(g.snaps, dev)
		last := series[len(series)-1]
		ds := DeviceStats{DeviceTotals: DeviceTotals{Device: dev, AllocatedBytes: last.allocated, ReservedBytes: last.reserved}}
		for _, dd := range series {
			if dd.traced {
				ds.PeakAllocatedBytes = higher(ds.PeakAllocatedBytes, dd.peakAllocated)
				ds.PeakReservedBytes = higher(ds.PeakReservedBytes, dd.peakReserved)
			}
		}
		if ds.PeakAllocatedBytes != nil {
			s.PeakAllocatedBytes = higher(s.PeakAllocatedBytes, *ds.PeakAllocatedBytes)
			s.PeakReservedBytes = higher(s.PeakReservedBytes, *ds.PeakReservedBytes)
		}
		s.Devices = append(s.Devices, ds)
	}
	return s
}

// higher returns a pointer to the larger of *p and v; nil p counts as
// nothing yet.
func higher(p *int64, v int64) *int64 {
	if p != nil && *p >= v {
		return p
	}
	return &v
}

// devicesOf lists the devices any snapshot has, ascending.
func devicesOf(snaps []*digest) []int {
	var out []int
	for _, d := range snaps {
		for _, dd := range d.devices {
			if !slices.Contains(out, dd.device) {
				out = append(out, dd.device)
			}
		}
	}
	slices.Sort(out)
	return out
}

// deviceSeries returns each snapshot's digest of device dev; a snapshot
// without the device contributes an empty one (nothing allocated there).
func deviceSeries(snaps []*digest, dev int) []*deviceDigest {
	out := make([]*deviceDigest, len(snaps))
	for i, d := range snaps {
		out[i] = &deviceDigest{device: dev, sites: map[string]*siteUse{}, chunks: map[block]string{}}
		for k := range d.devices {
			if d.devices[k].device == dev {
				out[i] = &d.devices[k]
			}
		}
	}
	return out
}

// describe is a short label for a text input in evidence and notes.
func describe(t *textDigest) string { return fmt.Sprintf("%s %s", t.kind, t.in) }
