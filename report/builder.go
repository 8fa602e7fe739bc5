package report

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Options tune a Builder. Zero values take the defaults.
type Options struct {
	// Filter decides which frames are user code; it must be the filter
	// the analyze.Analyzer used, so that callsites match the findings'.
	Filter *callsite.Filter
	// Buckets is how many min/max buckets a timeline keeps (1200: about
	// one per pixel of a wide chart).
	Buckets int
	// MaxMarkers bounds the markers of one kind per device (400: more
	// lines than that is a grey wash, not information).
	MaxMarkers int
	// MaxBlocks bounds the blocks of one allocator state (20000); the
	// smallest segments are left out beyond it.
	MaxBlocks int
	// MaxOOMStates is how many OOMs per device get an allocator state (3).
	MaxOOMStates int
	// FlameMin drops flame-graph frames holding less than this share of
	// the total (1/1000: narrower than a pixel at any useful width).
	FlameMin float64
	// StackDepth is how many user frames a site's stack shows (8).
	StackDepth int
}

func (o Options) withDefaults() Options {
	if o.Filter == nil {
		// Empty patterns cannot fail to compile.
		o.Filter, _ = callsite.NewFilter("", "")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Buckets, 1200)
	def(&o.MaxMarkers, 400)
	def(&o.MaxBlocks, 20000)
	def(&o.MaxOOMStates, 3)
	def(&o.StackDepth, 8)
	if o.FlameMin <= 0 {
		o.FlameMin = 1.0 / 1000
	}
	return o
}

// Builder collects snapshot views and joins them with an analysis. Its
// methods are safe for concurrent use.
type Builder struct {
	opts Options

	mu    sync.Mutex
	views map[string]*built // by input path
}

// built is a snapshot's view plus what Finish still needs of it.
type built struct {
	view SnapshotView
	// end are the live blocks at the end by stack, for the flame graph of
	// the leaked set.
	end []sample
}

// NewBuilder returns an empty Builder.
func NewBuilder(opts Options) *Builder {
	return &Builder{opts: opts.withDefaults(), views: map[string]*built{}}
}

// AddSnapshot reduces sn, read from in and replayed into tls (one timeline
// per device, replay.Devices), to its view. The Builder keeps no reference
// to sn or tls.
func (b *Builder) AddSnapshot(in inputs.Input, sn *snapshot.Snapshot, tls []*replay.Timeline) error {
	v := &built{view: SnapshotView{Input: in.Path, Devices: []DeviceView{}}}
	if in.HasStep {
		step := in.Step
		v.view.Step = &step
	}
	var end []sample
	for _, tl := range tls {
		dv, err := b.device(sn, tl)
		if err != nil {
			return fmt.Errorf("report of %s: %w", in, err)
		}
		v.view.Devices = append(v.view.Devices, dv)
		end = append(end, b.samplesAtEnd(sn, tl.Device)...)
	}
	v.end = mergeSamples(end)
	v.view.EndSites = siteTotals(v.end)
	b.mu.Lock()
	b.views[in.Path] = v
	b.mu.Unlock()
	return nil
}

// device builds one device's view.
func (b *Builder) device(sn *snapshot.Snapshot, tl *replay.Timeline) (DeviceView, error) {
	dv := DeviceView{
		Device: tl.Device, Events: tl.Len(),
		Series:  b.series(tl),
		States:  []State{},
		Flames:  []Flame{},
		Caveats: []string{},
	}
	dv.Markers = b.markers(sn, tl, dv.Series)
	dv.WhatIf = b.whatIf(sn, tl, dv.Series)
	dv.Composition = b.composition(sn, tl, dv.Series)
	for _, c := range tl.Caveats {
		dv.Caveats = append(dv.Caveats, c.String())
	}
	end := b.samplesAtEnd(sn, tl.Device)
	if tl.Len() > 0 {
		peak := tl.Peak(replay.Allocated)
		st, err := b.StateOf(sn, tl, peak.Index, "peak")
		if err != nil {
			return dv, err
		}
		dv.States = append(dv.States, st)
		dv.Flames = append(dv.Flames, b.flame("live at the peak", b.samplesAt(sn, tl, peak.Index)))
	}
	dv.States = append(dv.States, b.endState(sn, tl))
	dv.Flames = append(dv.Flames, b.flame("live at the end", end))
	for k, i := range ooms(tl) {
		if k == b.opts.MaxOOMStates {
			break
		}
		st, err := b.StateOf(sn, tl, i, fmt.Sprintf("oom %d", k+1))
		if err != nil {
			return dv, err
		}
		dv.States = append(dv.States, st)
	}
	return dv, nil
}

// Finish joins the views added so far with rep, which analyzed the same
// inputs, and numbers the snapshots in payload order.
func (b *Builder) Finish(rep *analyze.Report) *Payload {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &Payload{Version: PayloadVersion, Verdict: rep.Verdict, Processes: []Process{}}
	id := 0
	for _, rp := range rep.Processes {
		pr := Process{
			ID: rp.ID, Verdict: rp.Verdict, Stats: rp.Stats, Inputs: rp.Inputs,
			Findings: pageFindings(rp.Findings), Notes: rp.Notes, Totals: rp.Snapshots,
			Snapshots: []SnapshotView{}, Sites: []SiteSeries{}, Pools: rp.PoolCharts,
		}
		var views []*built
		for _, pt := range rp.Snapshots {
			if v := b.views[pt.Input]; v != nil {
				v.view.ID = id
				id++
				pr.Snapshots = append(pr.Snapshots, v.view)
				views = append(views, v)
			}
		}
		keepAdvised(&pr)
		leaks := leakSites(rp.Findings)
		pr.Sites = siteSeries(views, leaks)
		if n := len(views); n > 0 && len(leaks) > 0 {
			held := slices.DeleteFunc(slices.Clone(views[n-1].end), func(s sample) bool { return !leaks[s.site] })
			fl := b.flame("held by leaking callsites at the end", held)
			pr.Leaked = &fl
		}
		pr.Focus = focusOf(&pr)
		p.Processes = append(p.Processes, pr)
	}
	return p
}

// pageFindings copies fs with an empty stack and evidence where a
// finding has none (a finding without a place has a nil stack), so that
// the payload's arrays and objects are never null.
func pageFindings(fs []diagnose.Finding) []diagnose.Finding {
	out := slices.Clone(fs)
	for i := range out {
		if out[i].Stack == nil {
			out[i].Stack = []diagnose.Frame{}
		}
		if out[i].Evidence == nil {
			out[i].Evidence = map[string]any{}
		}
	}
	return out
}

// leakSites lists the callsites of leak findings, labelled as
// callsite.Site.String labels a known site.
func leakSites(fs []diagnose.Finding) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		if f.Kind == diagnose.KindLeak && f.Callsite != nil {
			out[frameLabel(f.Callsite)] = true
		}
	}
	return out
}

func frameLabel(f *diagnose.Frame) string {
	line := f.Line
	if line == 0 {
		line = snapshot.UnknownLine
	}
	return snapshot.Frame{Name: f.Function, Filename: f.File, Line: line}.String()
}

// ooms lists the OOM events of tl's trace.
func ooms(tl *replay.Timeline) []int {
	var out []int
	for i, e := range tl.Trace.Others() {
		if e.Action == snapshot.ActionOOM {
			out = append(out, i)
		}
	}
	return out
}

// byBytes orders larger first, then by name for a stable output.
func byBytes(a, b SiteBytes) int {
	if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
		return c
	}
	return cmp.Compare(a.Site, b.Site)
}

// Filter is the callsite filter the Builder names callsites with, for the
// views that the served UI computes beside it (a diff of two snapshots).
func (b *Builder) Filter() *callsite.Filter { return b.opts.Filter }
