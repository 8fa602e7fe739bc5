package analyze

import (
	"sync"

	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/memlog"
	"github.com/vramscope/vramscope/snapshot"
)

// Options tune an Analyzer.
type Options struct {
	// Filter decides which frames are user code; nil means the defaults.
	Filter *callsite.Filter
	// StackDepth is how many user frames a finding's stack shows (5 when 0).
	StackDepth int
	// Rules are the user's own breakdown rules (breakdown.ParseRules).
	Rules []breakdown.Rule
}

// Analyzer collects digests of inputs and builds the Report. Its Add
// methods are safe for concurrent use, so that a caller can decode files
// in parallel when memory allows.
type Analyzer struct {
	opts   Options
	filter *callsite.Filter
	sites  sites

	mu    sync.Mutex
	snaps []*digest
	texts []*textDigest
	// order ranks the inputs Expect named; others rank after them, as
	// they arrive (arrived counts them).
	order   map[string]int
	arrived int
	// several holds the snapshots Expect named whose process has other
	// snapshots among them.
	several map[string]bool
}

// New returns an empty Analyzer.
func New(opts Options) *Analyzer {
	if opts.StackDepth <= 0 {
		opts.StackDepth = 5
	}
	f := opts.Filter
	if f == nil {
		// Empty patterns cannot fail to compile.
		f, _ = callsite.NewFilter("", "")
	}
	return &Analyzer{opts: opts, filter: f, sites: sites{byKey: map[string]*site{}}}
}

// Expect names the inputs the Analyzer will be given, in order. A site
// that several snapshots show is printed with the user stack that the
// first of them in this order shows, whichever is digested first, so a
// report does not depend on how inputs decoded in parallel were timed;
// without Expect, the first digested gives it.
func (a *Analyzer) Expect(ins []inputs.Input) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.order = make(map[string]int, len(ins))
	for i, in := range ins {
		if _, ok := a.order[in.Path]; !ok {
			a.order[in.Path] = i
		}
	}
	snaps := map[string]int{} // distinct snapshots per process
	for i, in := range ins {
		if in.Kind == inputs.Snapshot && a.order[in.Path] == i {
			snaps[processID(in)]++
		}
	}
	a.several = map[string]bool{}
	for _, in := range ins {
		if in.Kind == inputs.Snapshot {
			a.several[in.Path] = snaps[processID(in)] > 1
		}
	}
}

// advised is the kinds of trace findings of in that get the allocator
// model's advice: only OOMs where in's process has other snapshots, as
// mergeTraceFindings keeps no other finding that carries advice from any
// of them. (A process left with one snapshot because the others failed to
// load shows its fragmentation finding without the model's numbers.)
func (a *Analyzer) advised(in inputs.Input) []diagnose.Kind {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.several[in.Path] {
		return []diagnose.Kind{diagnose.KindOOM}
	}
	return []diagnose.Kind{diagnose.KindOOM, diagnose.KindFragmentation}
}

// rank is in's place in the order sites choose their stacks by.
func (a *Analyzer) rank(in inputs.Input) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.order[in.Path]; ok {
		return r
	}
	a.arrived++
	return len(a.order) + a.arrived
}

// AddSnapshot digests sn, read from in. The Analyzer keeps no reference to
// sn: the caller may drop it as soon as this returns.
func (a *Analyzer) AddSnapshot(in inputs.Input, sn *snapshot.Snapshot) {
	d := a.digestSnapshot(in, sn)
	a.mu.Lock()
	a.snaps = append(a.snaps, d)
	a.mu.Unlock()
}

// AddMemoryLog adds a memory-log CSV read by memlog.ParseCSV.
func (a *Analyzer) AddMemoryLog(in inputs.Input, s *memlog.Series) {
	a.addText(logDigest(in, s))
}

// AddMemorySummaries adds memory_summary() tables read from one text file,
// in file order: a series like a memory log's.
func (a *Analyzer) AddMemorySummaries(in inputs.Input, sums []memlog.MemorySummary) {
	a.addText(summaryDigest(in, sums))
}

// AddOOMMessages adds the out-of-memory messages found in one text file.
func (a *Analyzer) AddOOMMessages(in inputs.Input, msgs []memlog.OOMMessage) {
	a.addText(oomDigests(in, msgs)...)
}

func (a *Analyzer) addText(ts ...*textDigest) {
	a.mu.Lock()
	a.texts = append(a.texts, ts...)
	a.mu.Unlock()
}

// Report analyzes everything added so far.
func (a *Analyzer) Report() *Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &Report{Version: ReportVersion, Verdict: Healthy, Processes: []Process{}}
	for _, g := range group(a.snaps, a.texts) {
		p := a.analyzeProcess(g)
		r.Verdict = worse(r.Verdict, p.Verdict)
		r.Processes = append(r.Processes, p)
	}
	if len(r.Processes) == 0 {
		r.Verdict = NoVerdict
	}
	return r
}
