// Package diff compares two recordings of one program's GPU memory (two
// snapshots, two runs, two ranks or two steps) at one moment of each: the
// allocated peak, the end, or the end of step N. It answers "what does B
// hold that A did not?": the allocated and reserved bytes and the peaks of
// both, the allocator settings and torch versions that differ, and the
// live bytes by callsite, by category and by module (as package breakdown
// labels each block), each row marked added, removed, grown or shrunk.
//
// Callsites are grouped without line numbers by default, and files are
// named without the folders that differ between checkouts, so that a small
// edit or another machine does not break the match.
package diff

import (
	"fmt"

	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Version is the JSON format's version.
const Version = 1

// Side is one side of a comparison: one process's snapshot, replayed.
type Side struct {
	Path      string
	Snapshot  *snapshot.Snapshot
	Timelines []*replay.Timeline
	// TorchVersion is the torch that wrote it, where known (TorchVersion).
	TorchVersion string
	// FileStep is the step whose end the snapshot was dumped at, as its
	// name says (step3/…pickle); nil when it does not.
	FileStep *int
}

// Options tune a comparison. The zero value compares the peaks by
// callsite (without lines), category and module, keeping every row.
type Options struct {
	At Moment
	// By are the tables to make (nil: callsite, category and module).
	By []breakdown.By
	// Rules are the user's category rules (breakdown.ParseRules).
	Rules []breakdown.Rule
	// Lines keeps line numbers in callsite keys.
	Lines bool
	// Top is how many rows a table keeps; the rest are summed (0: all).
	Top int
	// Filter decides which frames are user code; nil means the defaults.
	Filter *callsite.Filter
}

// Report is a comparison of pairs of sides at one moment: one pair for two
// snapshots, one per matched process for two runs.
type Report struct {
	Version int    `json:"version"`
	At      string `json:"at"`
	// Lines says whether callsites were told apart by line.
	Lines bool   `json:"lines"`
	Pairs []Pair `json:"pairs"`
	// Unmatched lists the processes of one run that the other lacks ("A:
	// NAME"), and with --steps those without a dump of either step.
	Unmatched []string `json:"unmatched"`
}

// NewReport is an empty report of comparisons made with opts.
func NewReport(opts Options) *Report {
	return &Report{Version: Version, At: opts.At.String(), Lines: opts.Lines, Pairs: []Pair{}, Unmatched: []string{}}
}

// Pair compares one process's two sides.
type Pair struct {
	// Name is the process both sides are ("rank0"), or, for sides of
	// different processes, both names ("rank0 vs rank3"); "" for two files.
	Name     string    `json:"name"`
	A        SideInfo  `json:"a"`
	B        SideInfo  `json:"b"`
	Settings []Setting `json:"settings"`
	// TorchVersionsDiffer is set when both versions are known and differ.
	TorchVersionsDiffer bool     `json:"torch_versions_differ"`
	Devices             []Device `json:"devices"`
}

// SideInfo names one side's file.
type SideInfo struct {
	Path         string `json:"path"`
	TorchVersion string `json:"torch_version"`
}

// Device compares one device of both sides at the moment. Each table is
// nil unless Options.By asked for it.
type Device struct {
	// Summary says in a sentence how much more or less B holds and the
	// largest difference of each table.
	Summary string     `json:"summary"`
	A       DeviceSide `json:"a"`
	B       DeviceSide `json:"b"`
	// Delta is B minus A; its peaks are null when a side has no trace.
	Delta      Totals `json:"delta"`
	Callsites  *Table `json:"callsites,omitempty"`
	Categories *Table `json:"categories,omitempty"`
	Modules    *Table `json:"modules,omitempty"`
}

// AllBy are the tables a comparison makes by default, in display order.
var AllBy = []breakdown.By{breakdown.ByCallsite, breakdown.ByCategory, breakdown.ByModule}

// DeviceSide is one side's device at the moment.
type DeviceSide struct {
	// Device is the CUDA ordinal; -1 when this side has no such device.
	Device int `json:"device"`
	Point
	Totals
}

// Totals are the allocated and reserved bytes at the moment, and the
// trace's peaks (null without a trace).
type Totals struct {
	AllocatedBytes     int64  `json:"allocated_bytes"`
	ReservedBytes      int64  `json:"reserved_bytes"`
	PeakAllocatedBytes *int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  *int64 `json:"peak_reserved_bytes"`
}

// minus is t - o; a peak only where both have one.
func (t Totals) minus(o Totals) Totals {
	d := Totals{AllocatedBytes: t.AllocatedBytes - o.AllocatedBytes, ReservedBytes: t.ReservedBytes - o.ReservedBytes}
	sub := func(x, y *int64) *int64 {
		if x == nil || y == nil {
			return nil
		}
		v := *x - *y
		return &v
	}
	d.PeakAllocatedBytes = sub(t.PeakAllocatedBytes, o.PeakAllocatedBytes)
	d.PeakReservedBytes = sub(t.PeakReservedBytes, o.PeakReservedBytes)
	return d
}

// Compare compares a and b at opts.At.
func Compare(name string, a, b *Side, opts Options) (Pair, error) {
	if opts.Filter == nil {
		// Empty patterns cannot fail to compile.
		opts.Filter, _ = callsite.NewFilter("", "")
	}
	if opts.By == nil {
		opts.By = AllBy
	}
	p := Pair{
		Name:     name,
		A:        SideInfo{Path: a.Path, TorchVersion: a.TorchVersion},
		B:        SideInfo{Path: b.Path, TorchVersion: b.TorchVersion},
		Settings: settingsDiff(a.Snapshot.Settings, b.Snapshot.Settings),
		Devices:  []Device{},
	}
	p.TorchVersionsDiffer = a.TorchVersion != "" && b.TorchVersion != "" && a.TorchVersion != b.TorchVersion
	for _, dp := range pairDevices(a.Timelines, b.Timelines) {
		da, err := measure(a, dp[0], opts)
		if err != nil {
			return Pair{}, fmt.Errorf("%s: %w", a.Path, err)
		}
		db, err := measure(b, dp[1], opts)
		if err != nil {
			return Pair{}, fmt.Errorf("%s: %w", b.Path, err)
		}
		dev := Device{A: da.side, B: db.side, Delta: db.side.Totals.minus(da.side.Totals)}
		for _, by := range opts.By {
			t := newTable(da.groups[by], db.groups[by], opts.Top)
			switch by {
			case breakdown.ByCallsite:
				dev.Callsites = &t
			case breakdown.ByCategory:
				dev.Categories = &t
			case breakdown.ByModule:
				dev.Modules = &t
			}
		}
		dev.Summary = summarize(dev)
		p.Devices = append(p.Devices, dev)
	}
	return p, nil
}

// pairDevices pairs the devices of both sides: the one device of each when
// each has one (two ranks on their own GPUs), else by ordinal, with nil
// for a device one side lacks.
func pairDevices(a, b []*replay.Timeline) [][2]*replay.Timeline {
	if len(a) == 1 && len(b) == 1 {
		return [][2]*replay.Timeline{{a[0], b[0]}}
	}
	var out [][2]*replay.Timeline
	for _, ta := range a {
		var match *replay.Timeline
		for _, tb := range b {
			if tb.Device == ta.Device {
				match = tb
			}
		}
		out = append(out, [2]*replay.Timeline{ta, match})
	}
	for _, tb := range b {
		found := false
		for _, ta := range a {
			found = found || ta.Device == tb.Device
		}
		if !found {
			out = append(out, [2]*replay.Timeline{nil, tb})
		}
	}
	return out
}

// measured is one side's device at the moment: its totals and its live
// blocks grouped each way asked for.
type measured struct {
	side   DeviceSide
	groups map[breakdown.By]map[string]*group
}

// measure takes side s's device tl (nil: the side lacks it) at the moment.
func measure(s *Side, tl *replay.Timeline, opts Options) (measured, error) {
	m := measured{side: DeviceSide{Device: -1}, groups: map[breakdown.By]map[string]*group{}}
	if tl == nil {
		return m, nil
	}
	pt, err := locate(s.Snapshot, tl, opts.Filter, opts.At, s.FileStep)
	if err != nil {
		return m, err
	}
	at := tl.At(pt.Event)
	m.side = DeviceSide{Device: tl.Device, Point: pt, Totals: Totals{AllocatedBytes: at.Allocated, ReservedBytes: at.Reserved}}
	if tl.Len() > 0 {
		pa, pr := tl.Peak(replay.Allocated).Bytes, tl.Peak(replay.Reserved).Bytes
		m.side.PeakAllocatedBytes, m.side.PeakReservedBytes = &pa, &pr
	}
	var labels *breakdown.Breakdown
	for _, by := range opts.By {
		switch by {
		case breakdown.ByCallsite:
			m.groups[by] = callsites(s.Snapshot, tl, pt.Event, opts)
		case breakdown.ByCategory, breakdown.ByModule:
			if labels == nil {
				labels = breakdown.Classify(s.Snapshot, tl, breakdown.Options{Filter: opts.Filter, Rules: opts.Rules, Source: &callsite.Source{}})
			}
			m.groups[by] = labelled(labels.Table(pt.Event, by))
		}
	}
	return m, nil
}

// callsites groups the blocks allocated right after event i by place.
func callsites(sn *snapshot.Snapshot, tl *replay.Timeline, i int, opts Options) map[string]*group {
	groups := map[string]*group{}
	placer := diagnose.NewPlacer(sn, tl, opts.Filter)
	for _, k := range tl.LiveAt(i) {
		a := tl.Allocation(k)
		if !a.AllocatedAt(i) {
			continue // pending free: not allocated
		}
		pl := placer.Allocation(k)
		key := groupPlace(pl, opts.Lines)
		g := groups[key.Key()]
		if g == nil {
			g = &group{name: key.String(), loose: loosePlace(pl).Key()}
			groups[key.Key()] = g
		}
		g.add(a.Size, pl)
	}
	for _, g := range groups {
		g.place = newPlace(g.at, placer.Frames(g.at))
	}
	return groups
}

// labelled is a breakdown table's rows as groups; empty rows (a category
// table lists every category) are left out.
func labelled(t breakdown.Table) map[string]*group {
	groups := map[string]*group{}
	for _, r := range t.Rows {
		if r.Bytes != 0 {
			groups[r.Name] = &group{name: r.Name, bytes: r.Bytes, blocks: r.Blocks}
		}
	}
	return groups
}
