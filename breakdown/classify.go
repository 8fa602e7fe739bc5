package breakdown

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Label is what Classify decided for one block.
type Label struct {
	Category Category `json:"category"`
	// Rule names the rule that decided: "stack.module_apply",
	// "phase.forward_freed_in_backward", "user:3" (line 3 of the rules
	// file), "unknown.no_frames".
	Rule string `json:"rule"`
	// Evidence says what the rule saw: the frame it matched, the phases of
	// the block's allocation and free.
	Evidence string `json:"evidence"`
	// Module is the module whose forward allocated the block: its exact
	// name where the trace's user_metadata carries one ("model.layers.3.mlp"),
	// else the chain of forward frames, outermost first
	// ("LlamaDecoderLayer > LlamaMLP"). "" outside a forward.
	Module string `json:"module,omitempty"`
}

// Options tune Classify.
type Options struct {
	// Filter decides the user's frames for callsite tables; nil: defaults.
	Filter *callsite.Filter
	// Rules are the user's own rules, tried before the built-in ones.
	Rules []Rule
	// Source reads class names of forward frames from the source files
	// where they exist on this machine; nil: file and line only.
	Source *callsite.Source
	// Cores is how many cores ReadEvents reads the events on at most; 0:
	// every core.
	Cores int
}

// Breakdown is one device timeline's blocks, labelled.
type Breakdown struct {
	Device int
	sn     *snapshot.Snapshot
	tl     *replay.Timeline
	filter *callsite.Filter
	scan   *diagnose.BackwardScan

	labels []Label  // distinct labels
	of     []uint32 // per allocation: index in labels
	// categories are the built-in categories, then the user's that occur.
	categories []Category
	sites      map[snapshot.StackID]string
}

// Timeline is the timeline b labels.
func (b *Breakdown) Timeline() *replay.Timeline { return b.tl }

// Len is the number of labelled blocks: tl.NumAllocations().
func (b *Breakdown) Len() int { return len(b.of) }

// Label returns allocation k's label.
func (b *Breakdown) Label(k int) Label { return b.labels[b.of[k]] }

// Categories lists the categories a table of b has a row for: the
// built-in ones in display order, then the user's in rule order.
func (b *Breakdown) Categories() []Category { return b.categories }

// Events is what Classify reads of one device's trace events alone,
// without the replay: each event's phase, the allocations inside a module
// forward, the sizes of the blocks stage A calls parameters and
// workspaces. analyze reads it beside the replay. It is read-only once
// made, but for memos that take concurrent use.
type Events struct {
	sn      *snapshot.Snapshot
	device  int
	tr      snapshot.Trace
	opts    Options
	stacks  []atomic.Pointer[stackInfo] // by StackID, read on first use
	optim   []diagnose.Window           // Optimizer.step#* ranges, by start
	zero    []diagnose.Window           // Optimizer.zero_grad#* ranges
	windows []diagnose.Window           // all ranges, for user rules
	// phases holds each event's phase (phaseOf), placed by allPhases on
	// Classify's first use: Report asks only its blocks' (phasesAt).
	phases     []phase
	phasesOnce sync.Once
	// forwards are the allocations inside a module forward, ascending:
	// nearly every one of a generate() trace's (3 M on a 1 GB one), in 4
	// bytes each.
	forwards []int32
	// tracedParams are the requested sizes of the traced blocks that
	// stage A calls parameters.
	tracedParams map[uint64]bool
	// workspaceSizes are the sizes of blocks stage A saw as cuBLAS
	// workspaces, with the defaults (32 MiB + 4 MiB is CUBLAS_WORKSPACE_CONFIG's
	// :4096:8 on Hopper; 1 MiB cuBLASLt's) for traces without C++ frames.
	workspaceSizes map[uint64]bool
	classMu        sync.Mutex
	classes        map[snapshot.Frame]string
}

// classifier is one Classify call's state: what every range of the pass
// over the allocations reads, written before it runs.
type classifier struct {
	*Events
	tl *replay.Timeline
	// paramSizes are the requested sizes of parameter-like blocks: what a
	// gradient's size must equal.
	paramSizes map[uint64]bool
	// workspaces are the allocations that rules A and B could make a
	// workspace and that are the first kept block of their stack and a
	// workspace size.
	workspaces map[int]bool
	// phases are every event's phase (allPhases), or nil where only the
	// events at, ascending, are asked, whose phases are atPhases.
	phases   []phase
	at       []int32
	atPhases []phase
}

// rangeLen is the fewest events or allocations a range of Classify's
// passes holds: a trace of a few thousand events is one range. A variable
// for tests to split small traces.
var rangeLen = 1 << 16

// Classify labels every block of tl: ReadEvents, then Events.Classify.
func Classify(sn *snapshot.Snapshot, tl *replay.Timeline, opts Options) *Breakdown {
	return ReadEvents(sn, tl.Device, tl.Trace, opts).Classify(tl)
}

// ReadEvents reads device's trace tr (sn.Traces[device]) for Classify.
// Its pass over the events runs in ranges on every core.
func ReadEvents(sn *snapshot.Snapshot, device int, tr snapshot.Trace, opts Options) *Events {
	if opts.Filter == nil {
		opts.Filter, _ = callsite.NewFilter("", "")
	}
	ev := &Events{
		sn: sn, device: device, tr: tr, opts: opts,
		stacks:         make([]atomic.Pointer[stackInfo], sn.NumStacks()),
		tracedParams:   map[uint64]bool{},
		workspaceSizes: map[uint64]bool{32 << 20: true, 32<<20 + 4<<20: true, 1 << 20: true},
		classes:        map[snapshot.Frame]string{},
	}
	ev.windows = diagnose.AnnotationWindows(sn.Annotations, device, tr)
	for _, w := range ev.windows {
		switch {
		case strings.HasPrefix(w.Name, "Optimizer.step#"):
			ev.optim = append(ev.optim, w)
		case strings.HasPrefix(w.Name, "Optimizer.zero_grad#"):
			ev.zero = append(ev.zero, w)
		}
	}
	ev.scan()
	return ev
}

// Classify labels every block of tl, the replay of ev's trace. Its pass
// over the allocations runs in ranges on every core; each range interns
// its own labels in the order it meets them, and the ranges' labels are
// merged in range order, so the labels and their order are one core's.
func (ev *Events) Classify(tl *replay.Timeline) *Breakdown { return ev.classify(tl, nil) }

// classify labels the allocations only of tl (ascending), or every one
// where only is nil, as Classify does. A Breakdown labelled in part
// answers only for those, and lists only the user's categories they
// have: Report's, which labels the blocks its moments count.
func (ev *Events) classify(tl *replay.Timeline, only []int32) *Breakdown {
	if tl.Device != ev.device || tl.Trace != ev.tr {
		ev = ReadEvents(ev.sn, tl.Device, tl.Trace, ev.opts)
	}
	c := &classifier{Events: ev, tl: tl, paramSizes: maps.Clone(ev.tracedParams), workspaces: map[int]bool{}}
	n := tl.NumAllocations()
	if only == nil {
		c.phases = ev.allPhases()
	} else {
		c.at, c.atPhases = ev.phasesAt(tl, only)
	}
	// Allocations live before the trace come first; their sizes are
	// parameter-like.
	for k := 0; k < n; k++ {
		if start, _, _ := tl.Lifetime(k); start >= 0 {
			break
		}
		if a := tl.Allocation(k); a.Origin != replay.Traced {
			c.paramSizes[a.Requested] = true
		}
	}
	c.findWorkspaces()

	b := &Breakdown{Device: tl.Device, sn: ev.sn, tl: tl, filter: ev.opts.Filter, scan: diagnose.NewBackwardScan(ev.sn, tl.Trace, ev.opts.Filter), of: make([]uint32, n), sites: map[snapshot.StackID]string{}}
	m := n
	if only != nil {
		m = len(only)
	}
	alloc := func(j int) int { // the j-th allocation labelled
		if only == nil {
			return j
		}
		return int(only[j])
	}
	bounds := parallel.Ranges(m, rangeLen)
	parts := make([]labeller, len(bounds)-1)
	parallel.Do(bounds, func(p, lo, hi int) {
		l := &parts[p]
		*l = labeller{c: c, index: map[Label]uint32{}, decided: map[facts]uint32{}, last: -1}
		for j := lo; j < hi; j++ {
			k := alloc(j)
			a := tl.Allocation(k)
			b.of[k] = l.labelOf(&a, k)
		}
	})
	// Part 0's labels come first and keep their indices; the others'
	// are renumbered.
	index := map[Label]uint32{}
	remap := make([][]uint32, len(parts))
	for p, l := range parts {
		for _, lab := range l.labels {
			id, ok := index[lab]
			if !ok {
				id = uint32(len(b.labels))
				index[lab] = id
				b.labels = append(b.labels, lab)
			}
			remap[p] = append(remap[p], id)
		}
	}
	parallel.Do(bounds, func(p, lo, hi int) {
		if p == 0 {
			return
		}
		for j := lo; j < hi; j++ {
			k := alloc(j)
			b.of[k] = remap[p][b.of[k]]
		}
	})
	user := map[Category]bool{}
	for _, l := range b.labels {
		if !l.Category.Builtin() {
			user[l.Category] = true
		}
	}
	b.categories = Categories()
	for _, r := range ev.opts.Rules {
		if user[r.Category] {
			b.categories = append(b.categories, r.Category)
			delete(user, r.Category)
		}
	}
	return b
}

// info is stack id's stackInfo, memoized. Ranges running at once may read
// a stack twice; they store equal infos.
func (ev *Events) info(id snapshot.StackID) *stackInfo {
	si := ev.stacks[id].Load()
	if si == nil {
		s := readStack(ev.sn, id)
		si = &s
		ev.stacks[id].Store(si)
	}
	return si
}

// ranges are the ranges of the events the passes over them take: on
// opts.Cores cores at most.
func (ev *Events) ranges() []int {
	cores := ev.opts.Cores
	if cores <= 0 {
		cores = runtime.GOMAXPROCS(0)
	}
	return parallel.RangesOn(ev.tr.Len(), rangeLen, cores)
}

// scan fills ev.forwards and the sizes of the blocks whose stacks stage A
// calls parameters and workspaces, in ranges of the events.
func (ev *Events) scan() {
	type part struct {
		forwards               []int32
		paramSizes, workspaces []uint64
	}
	bounds := ev.ranges()
	parts := make([]part, len(bounds)-1)
	parallel.Do(bounds, func(p, lo, hi int) {
		out := &parts[p]
		var actions [snapshot.EventsBlock]snapshot.Action
		var stacks [snapshot.EventsBlock]snapshot.StackID
		var sizes [snapshot.EventsBlock]uint64
		for start := lo; start < hi; start += len(actions) {
			n := ev.tr.Columns(snapshot.Columns{Actions: actions[:min(len(actions), hi-start)], Stacks: stacks[:], Sizes: sizes[:]}, start)
			for j, act := range actions[:n] {
				if act != snapshot.ActionAlloc {
					continue
				}
				si := ev.info(stacks[j])
				if si.phase == phaseForward {
					out.forwards = append(out.forwards, int32(start+j))
				}
				if si.rule != nil {
					switch si.rule.kind {
					case kindParameter:
						out.paramSizes = append(out.paramSizes, sizes[j])
					case kindWorkspace:
						out.workspaces = append(out.workspaces, sizes[j])
					}
				}
			}
		}
	})
	n := 0
	for _, p := range parts {
		n += len(p.forwards)
	}
	ev.forwards = make([]int32, 0, n)
	for _, p := range parts {
		ev.forwards = append(ev.forwards, p.forwards...)
		for _, s := range p.paramSizes {
			ev.tracedParams[s] = true
		}
		for _, s := range p.workspaces {
			ev.workspaceSizes[s] = true
		}
	}
}

// allPhases returns every event's phase (phaseOf), placed in ranges of
// the events on the first call.
func (ev *Events) allPhases() []phase {
	ev.phasesOnce.Do(func() {
		ev.phases = make([]phase, ev.tr.Len())
		parallel.Do(ev.ranges(), ev.placePhases)
	})
	return ev.phases
}

// placePhases places the phases of events lo to hi-1 as phaseOf does, in
// one pass. An event without Python frames is inside a backward() call if
// the run of such events it is in is (During). A run that starts and ends
// in the range is settled at its end, by the events with Python frames
// around it: pending holds its events of no phase until then. Asking
// During for each event read the events ahead again, as far as the run's
// end (0.1 s of one core's 0.3 s pass on the 996 MB bench file).
func (ev *Events) placePhases(_, lo, hi int) {
	scan := diagnose.NewBackwardScan(ev.sn, ev.tr, ev.opts.Filter)
	optim, zero := ev.windowCursors()
	var actions [snapshot.EventsBlock]snapshot.Action
	var stacks [snapshot.EventsBlock]snapshot.StackID
	lastPython := snapshot.NoStack // the range's last event with Python frames
	seenPython := false
	var pending []int32
	phases := ev.phases
	for start := lo; start < hi; start += len(actions) {
		n := ev.tr.Columns(snapshot.Columns{Actions: actions[:min(len(actions), hi-start)], Stacks: stacks[:]}, start)
		for j, stack := range stacks[:n] {
			i := start + j
			p := ev.windowPhase(i, stack, &optim, &zero)
			switch python := scan.HasPython(stack); {
			case python:
				if len(pending) > 0 && scan.InCall(lastPython, stack) {
					for _, k := range pending {
						phases[k] = phaseBackward
					}
				}
				pending = pending[:0]
				lastPython, seenPython = stack, true
			case p != phaseNone:
			case seenPython:
				pending = append(pending, int32(i))
			case scan.During(i, stack) != nil: // a run begun before the range
				p = phaseBackward
			}
			phases[i] = p
		}
	}
	// A run that goes on past the range: During reads on to its end.
	if len(pending) > 0 && scan.During(int(pending[0]), ev.tr.StackAt(int(pending[0]))) != nil {
		for _, k := range pending {
			phases[k] = phaseBackward
		}
	}
}

// phaseAt is the phase of event i (phaseOf): none for an event outside
// the trace (a block's free at LiveAtEnd) or one Classify was not asked
// about.
func (c *classifier) phaseAt(i int) phase {
	if c.phases != nil {
		if uint(i) >= uint(len(c.phases)) {
			return phaseNone
		}
		return c.phases[i]
	}
	if j, ok := slices.BinarySearch(c.at, int32(i)); ok {
		return c.atPhases[j]
	}
	return phaseNone
}

// phaseOf is where event i, whose stack is stack, happened: its stack's
// phase, an annotation window's where the stack says nothing more
// (windowPhase), or, for an event without Python frames, inside the
// backward() call around it. The cursors and scan's During read on from
// the events asked before: i ascends, and each run is read once.
func (ev *Events) phaseOf(i int, stack snapshot.StackID, scan *diagnose.BackwardScan, optim, zero *windowCursor) phase {
	p := ev.windowPhase(i, stack, optim, zero)
	if p == phaseNone && scan.During(i, stack) != nil {
		p = phaseBackward
	}
	return p
}

// windowPhase is event i's phase by its stack, or by the optimizer's
// windows where the stack says none or only the top level: placePhases'
// and phaseOf's first step. i ascends from one call to the next.
func (ev *Events) windowPhase(i int, stack snapshot.StackID, optim, zero *windowCursor) phase {
	p := ev.info(stack).phase
	if p == phaseNone || p == phaseTop {
		switch {
		case optim.holds(i):
			p = phaseOptimizer
		case zero.holds(i):
			p = phaseZeroGrad
		}
	}
	return p
}

// windowCursors are cursors over the optimizer's step and zero_grad
// windows, for a pass over ascending events.
func (ev *Events) windowCursors() (optim, zero windowCursor) {
	return windowCursor{ws: ev.optim}, windowCursor{ws: ev.zero}
}

// phasesAt returns the events the labels of allocations only of tl read,
// their starts and frees, ascending, and their phases: a Report's few
// thousand blocks ask a few thousand events of millions.
func (ev *Events) phasesAt(tl *replay.Timeline, only []int32) ([]int32, []phase) {
	at := make([]int32, 0, 2*len(only))
	for _, k := range only {
		start, free, _ := tl.Lifetime(int(k))
		for _, i := range [2]int{start, free} {
			if i >= 0 && i < ev.tr.Len() {
				at = append(at, int32(i))
			}
		}
	}
	slices.Sort(at)
	at = slices.Compact(at)
	phases := make([]phase, len(at))
	scan := diagnose.NewBackwardScan(ev.sn, ev.tr, ev.opts.Filter)
	optim, zero := ev.windowCursors()
	for j, i := range at {
		phases[j] = ev.phaseOf(int(i), ev.tr.StackAt(int(i)), scan, &optim, &zero)
	}
	return at, phases
}

// windowCursor answers inWindow for ascending events. The answer changes
// only where a window starts or ends: until then it is kept (the scan
// asks about most events, and two seeks an event took 93 M of one core's
// 10.4 G instructions on the 288 MB bench file).
type windowCursor struct {
	ws    []diagnose.Window
	k     int  // the windows before k start at or before the last event sought
	until int  // the events from the last sought to until get in
	in    bool // whether a window holds them
}

// holds reports whether a window of c.ws holds event i, which is not
// below the last event asked.
func (c *windowCursor) holds(i int) bool {
	if i < c.until {
		return c.in
	}
	return c.seek(i)
}

// seek answers holds(i) from the windows, and notes until where the
// answer stays.
func (c *windowCursor) seek(i int) bool {
	for c.k < len(c.ws) && c.ws[c.k].First <= i {
		c.k++
	}
	next := math.MaxInt // where the next window starts
	if c.k < len(c.ws) {
		next = c.ws[c.k].First
	}
	c.in, c.until = false, next
	if c.k > 0 && i < c.ws[c.k-1].End {
		c.in, c.until = true, min(c.ws[c.k-1].End, next)
	}
	return c.in
}

// inWindow returns the index of the window of ws (in start order, not
// overlapping) that holds event i, or -1.
func inWindow(ws []diagnose.Window, i int) int {
	k := sort.Search(len(ws), func(k int) bool { return ws[k].First > i }) - 1
	if k >= 0 && i < ws[k].End {
		return k
	}
	return -1
}

// findWorkspaces finds the blocks with no stack rule that are cuBLAS
// workspaces by their lifetime: workspace-sized, never freed, and the
// first block of their stack and size (cuBLAS creates it on the first
// matmul of a thread and stream; a stacks="python" trace names no C++
// frame to tell). Kept blocks are few: one pass over them in allocation
// order finds them.
func (c *classifier) findWorkspaces() {
	seen := map[workspaceKey]bool{}
	for _, k := range c.tl.AllocatedAt(replay.LiveAtEnd - 1) {
		start, _, _ := c.tl.Lifetime(k)
		if start < 0 {
			continue
		}
		a := c.tl.Allocation(k)
		p := c.phaseAt(start)
		if _, user := c.userRule(&a); user || c.info(a.Stack).rule != nil || (p != phaseForward && p != phaseBackward) {
			continue
		}
		key := workspaceKey{a.Stack, a.Requested}
		if c.workspaceSizes[a.Requested] && !seen[key] {
			seen[key] = true
			c.workspaces[k] = true
		}
	}
}

// workspaceKey is a stack and a workspace size: cuBLAS and cuBLASLt each
// make one workspace on the first matmul of a thread.
type workspaceKey struct {
	stack snapshot.StackID
	size  uint64
}

// labeller labels one range of the allocations.
type labeller struct {
	c *classifier
	// labels are the range's distinct labels in the order it met them;
	// index finds them.
	labels  []Label
	index   map[Label]uint32
	decided map[facts]uint32 // label index by facts
	// forward is the index in c.forwards of the first forward allocation
	// at or after the last block's start.
	forward int
	last    int // the last block's start; -1 before the first
	recent  [256]recentFacts
}

var phaseNames = [...]string{"no frames", "top-level code", "a module forward", "backward", "zero_grad", "the optimizer step"}

func (p phase) String() string { return phaseNames[p] }

// facts are everything the built-in rules read of a traced block: blocks
// with equal facts get equal labels, so each distinct set is decided once
// (a trace of millions of blocks has a few thousand).
type facts struct {
	stack       snapshot.StackID
	pool        snapshot.PoolID
	metadata    snapshot.StringID // the alloc's user_metadata, for the module
	start, free phase             // of the alloc and the free (phaseNone: kept)
	kept        bool              // never freed in the trace
	sameStep    bool              // freed inside the optimizer step that allocated it
	paramSized  bool              // requested size equals a parameter's
	workspace   bool              // workspace-sized, kept, the first of its stack and size
	forwardLive bool              // a module forward allocated while it lived
	setup       bool              // allocated before the first forward of a trace that has one
}

// labelOf returns allocation k's label index in l, deciding it on the
// first block with its facts.
func (l *labeller) labelOf(a *replay.Allocation, k int) uint32 {
	intern := func(lab Label) uint32 {
		id, ok := l.index[lab]
		if !ok {
			id = uint32(len(l.labels))
			l.index[lab] = id
			l.labels = append(l.labels, lab)
		}
		return id
	}
	c := l.c
	if lab, ok := c.userRule(a); ok {
		return intern(lab)
	}
	if a.Origin != replay.Traced {
		return intern(Label{Category: BeforeRecording, Rule: "lifetime.before_recording",
			Evidence: fmt.Sprintf("live before the trace's first event (%s)", a.Origin)})
	}
	f := l.facts(a, k)
	slot := &l.recent[uint32(f.stack)%uint32(len(l.recent))]
	if slot.ok && slot.f == f {
		return slot.id
	}
	id, ok := l.decided[f]
	if !ok {
		id = intern(c.decide(f))
		l.decided[f] = id
	}
	*slot = recentFacts{f: f, id: id, ok: true}
	return id
}

// recentFacts is a labeller's last decision for a slot of stacks: the
// blocks of a loop's site come with the same facts again and again, and
// comparing facts costs a fraction of hashing them (the map lookups were
// 0.165 s of a classify's 0.6 s of CPU on the 996 MB bench file).
type recentFacts struct {
	f  facts
	id uint32
	ok bool
}

// facts gathers what the rules read of traced block k: only what the
// rules for its stack and phase read, so that blocks that differ in
// nothing else share one decision.
func (l *labeller) facts(a *replay.Allocation, k int) facts {
	c := l.c
	si := c.info(a.Stack)
	start, free := int(a.Start), int(a.Free)
	f := facts{stack: a.Stack, pool: a.Pool, start: c.phaseAt(start), kept: free >= replay.LiveAtEnd}
	if si.rule == nil && (f.start == phaseForward || f.start == phaseBackward) {
		f.workspace = f.kept && c.workspaces[k]
	}
	if !f.kept {
		f.free = c.phaseAt(free)
		if f.start == phaseOptimizer || si.rule != nil && si.rule.kind == kindOptimizer {
			if w := inWindow(c.optim, start); w >= 0 {
				f.sameStep = inWindow(c.optim, free) == w
			} else {
				f.sameStep = f.free == phaseOptimizer
			}
		}
	}
	switch f.start {
	case phaseBackward:
		f.paramSized = c.paramSizes[a.Requested]
	case phaseTop:
		f.forwardLive = l.nextForward(start) < free
		f.setup = len(c.forwards) > 0 && int(c.forwards[0]) > start
	}
	if f.start == phaseForward || f.start == phaseBackward || f.start == phaseNone {
		f.metadata = c.tr.Context(start).UserMetadata
	}
	return f
}

// nextForward is the first forward allocation at or after event start
// (LiveAtEnd: none). Blocks come in order of their starts: the search
// walks on from the last block's.
func (l *labeller) nextForward(start int) int {
	fw := l.c.forwards
	if l.last < 0 || start < l.last {
		l.forward, _ = slices.BinarySearch(fw, int32(start))
	}
	l.last = start
	for l.forward < len(fw) && int(fw[l.forward]) < start {
		l.forward++
	}
	if l.forward == len(fw) {
		return replay.LiveAtEnd
	}
	return int(fw[l.forward])
}

// decide labels a traced block by its facts.
func (c *classifier) decide(f facts) Label {
	if f.pool[0] != 0 {
		return Label{Category: GraphPool, Rule: "pool.cuda_graph", Evidence: "segment in CUDA graph pool " + f.pool.String()}
	}
	si := c.info(f.stack)
	l := c.stageA(f, si)
	if l.Category == "" {
		l = c.stageB(f)
	}
	if l.Category == Activation || l.Category == Temporary {
		l.Module = c.module(si, f.metadata)
	}
	return l
}

// stageA labels a block by its allocation stack.
func (c *classifier) stageA(f facts, si *stackInfo) Label {
	r := si.rule
	if r == nil {
		if f.pool != (snapshot.PoolID{}) {
			return Label{Category: GraphPool, Rule: "pool.private", Evidence: "segment in private pool " + f.pool.String()}
		}
		return Label{}
	}
	ev := "frame " + si.frame.String()
	switch r.kind {
	case kindWorkspace:
		return Label{Category: Workspace, Rule: r.id, Evidence: ev}
	case kindKVCache:
		return Label{Category: KVCache, Rule: r.id, Evidence: ev}
	case kindParameter:
		return Label{Category: Parameter, Rule: r.id, Evidence: ev}
	case kindOptimizer:
		if si.initGroup {
			return Label{Category: OptimizerState, Rule: "stack.optimizer_init_group", Evidence: ev + " (lazy state creation)"}
		}
		if !f.kept && f.sameStep {
			return Label{Category: Temporary, Rule: "stack.optimizer_temporary", Evidence: ev + "; freed inside the same optimizer step"}
		}
		return Label{Category: OptimizerState, Rule: r.id, Evidence: ev + "; outlives the optimizer step"}
	case kindCommunication:
		if f.start == phaseBackward && (f.kept || f.free == phaseZeroGrad) {
			return Label{Category: Gradient, Rule: "stack.distributed_sharded_grad", Evidence: ev + "; allocated in backward and kept until zero_grad or the end (FSDP's sharded gradients)"}
		}
		return Label{Category: Communication, Rule: r.id, Evidence: ev}
	}
	return Label{}
}

// stageB labels a block that no stack rule decided by its lifetime and
// the phases of its allocation and free.
func (c *classifier) stageB(f facts) Label {
	p, kept, freePhase := f.start, f.kept, f.free
	life := "kept to the end of the trace"
	if !kept {
		life = "freed in " + freePhase.String()
	}
	ev := "allocated in " + p.String() + ", " + life
	switch p {
	case phaseOptimizer:
		if !kept && f.sameStep {
			return Label{Category: Temporary, Rule: "phase.optimizer_temporary", Evidence: ev}
		}
		return Label{Category: OptimizerState, Rule: "phase.optimizer_step", Evidence: ev}
	case phaseZeroGrad:
		if kept || freePhase != phaseZeroGrad {
			return Label{Category: Gradient, Rule: "phase.zero_grad", Evidence: ev}
		}
		return Label{Category: Temporary, Rule: "phase.zero_grad_temporary", Evidence: ev}
	case phaseForward:
		if f.workspace {
			return Label{Category: Workspace, Rule: "phase.cublas_workspace", Evidence: ev + "; workspace-sized, the first of its stack"}
		}
		if !kept && freePhase == phaseForward {
			return Label{Category: Temporary, Rule: "phase.forward_temporary", Evidence: ev}
		}
		return Label{Category: Activation, Rule: "phase.forward_kept", Evidence: ev}
	case phaseBackward:
		switch {
		case !kept && freePhase == phaseBackward:
			return Label{Category: Temporary, Rule: "phase.backward_temporary", Evidence: ev}
		case f.paramSized:
			return Label{Category: Gradient, Rule: "phase.backward_kept", Evidence: ev + "; parameter-sized"}
		case f.workspace:
			return Label{Category: Workspace, Rule: "phase.cublas_workspace", Evidence: ev + "; workspace-sized, the first of its stack"}
		}
		return Label{Category: Temporary, Rule: "phase.backward_other", Evidence: ev + "; not parameter-sized"}
	case phaseTop:
		// With no module forward in the trace there is no model to own
		// what setup code keeps.
		if kept && f.setup {
			return Label{Category: Parameter, Rule: "phase.setup_kept", Evidence: ev + ", before the first forward"}
		}
		if f.forwardLive {
			return Label{Category: Input, Rule: "phase.before_forward", Evidence: ev + "; a module forward ran while it was live"}
		}
		switch {
		case kept:
			return Label{Category: Unknown, Rule: "unknown.top_level_kept", Evidence: ev}
		case freePhase == phaseBackward:
			return Label{Category: Activation, Rule: "phase.top_level_saved", Evidence: ev}
		}
		return Label{Category: Temporary, Rule: "phase.top_level_temporary", Evidence: ev}
	}
	return Label{Category: Unknown, Rule: "unknown.no_frames", Evidence: ev}
}
