package diagnose

import (
	"fmt"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Place is where a block's memory came from, as a finding names it: the
// user's line (Site), the code below it that allocated (Origin, often a
// library's line), and, for a block that the autograd engine's thread
// allocated during a backward() call, that call.
type Place struct {
	Site   callsite.Site
	Origin callsite.Origin
	// Backward is the backward() call whose autograd engine allocated the
	// block; Site is then the user's line of that call. Nil otherwise.
	Backward *BackwardCall
	stack    snapshot.StackID // whose user frames a finding prints
}

// Key groups places: the same user line reached through two different
// library lines is two places, so that each can be told apart.
func (p Place) Key() string {
	k := p.Site.Key()
	if p.Origin.Below(p.Site) {
		k += "|" + p.Origin.Key()
	}
	if p.Backward != nil {
		k += "|backward:" + p.Backward.Node + p.Backward.Hook.Key()
	}
	return k
}

// String is a place for a sentence: the origin where it differs from the
// callsite, then the callsite.
func (p Place) String() string {
	switch {
	case p.Backward != nil:
		return p.Backward.String()
	case p.Origin.Below(p.Site) && p.Site.Known():
		return fmt.Sprintf("%s, called from %s", p.Origin, p.Site.Frame)
	case p.Origin.Below(p.Site):
		return fmt.Sprintf("%s (%s)", p.Origin, callsite.ReasonLibraryOnly)
	}
	return siteName(p.Site)
}

// placer names the places of one timeline's allocations, memoized per
// stack; the autograd thread's blocks are placed by their trace position.
type placer struct {
	sn      *snapshot.Snapshot
	tl      *replay.Timeline
	f       *callsite.Filter
	byStack map[snapshot.StackID]Place
	engine  *engineScan
	// stackKeys memoizes allocKeys by stack (index StackID), callKeys by
	// stack and backward() call.
	stackKeys []stackKeys
	callKeys  map[callPlace]placeKeys
}

// placeKeys are the keys of a place: Place.Key, and the leak analysis's
// (placeKey).
type placeKeys struct{ key, leak string }

// stackKeys are the keys of a stack's own place, and whether a block
// allocated there may be the autograd engine's (engineThread), whose place
// then depends on the backward() call it was allocated in.
type stackKeys struct {
	done, engine bool
	placeKeys
}

// callPlace is what the key of a block the engine's thread allocated
// inside a backward() call depends on: the block's stack and the stack of
// the call's main-thread event (engineScan.callOf makes one call per such
// stack).
type callPlace struct{ stack, call snapshot.StackID }

// newPlacer makes a placer; one per goroutine, as its memos are its own.
func newPlacer(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *placer {
	return &placer{sn: sn, tl: tl, f: f, byStack: map[snapshot.StackID]Place{},
		stackKeys: make([]stackKeys, sn.NumStacks()), callKeys: map[callPlace]placeKeys{}}
}

// stack is the place of a stack, wherever it was recorded.
func (p *placer) stack(id snapshot.StackID) Place {
	if pl, ok := p.byStack[id]; ok {
		return pl
	}
	pl := Place{Site: p.f.Site(p.sn, id), Origin: p.f.Origin(p.sn, id), stack: id}
	p.byStack[id] = pl
	return pl
}

// alloc is the place of allocation k: its stack's, unless the block was
// allocated in the trace by a thread without Python frames during a
// backward() call, which then is its place.
func (p *placer) alloc(k int) Place {
	return inCall(p.allocCall(k))
}

// allocCall is the place of allocation k's stack and the backward() call
// the block was allocated in by the autograd engine's thread, or nil.
func (p *placer) allocCall(k int) (Place, *BackwardCall) {
	a := p.tl.Allocation(k)
	pl := p.stack(a.Stack)
	if a.Start == replay.BeforeRecording || !p.engineThread(a.Stack, pl) {
		return pl, nil
	}
	return pl, p.scan().during(int(a.Start))
}

// allocKeys are the keys of the place of a (tl.Allocation(k), as alloc(k)
// places it), memoized by what they depend on (stackKeys, callPlace):
// loops over every allocation ask for millions of keys of a few hundred
// places (building each place and its key took bestLine 1.8 s of the
// 996 MB bench file's 2.5 s explain).
func (p *placer) allocKeys(a *replay.Allocation) placeKeys {
	return p.keysAt(a.Stack, a.Start)
}

// keysAt is allocKeys of a block allocated at event start with stack.
func (p *placer) keysAt(stack snapshot.StackID, start int32) placeKeys {
	ks, engine := p.ownKeys(stack)
	if !engine || start == replay.BeforeRecording {
		return ks
	}
	call := p.scan().during(int(start))
	if call == nil {
		return ks
	}
	id := callPlace{stack, call.stack}
	ks, ok := p.callKeys[id]
	if !ok {
		ks = keysOf(inCall(p.stack(stack), call), stack)
		p.callKeys[id] = ks
	}
	return ks
}

// ownKeys are the keys of a stack's own place, and whether a block
// allocated there may be the autograd engine's, whose place is then its
// backward() call's where it was allocated in one (keysAt).
func (p *placer) ownKeys(stack snapshot.StackID) (placeKeys, bool) {
	sk := &p.stackKeys[stack]
	if !sk.done {
		pl := p.stack(stack)
		*sk = stackKeys{done: true, engine: p.engineThread(stack, pl), placeKeys: keysOf(pl, stack)}
	}
	return sk.placeKeys, sk.engine
}

func keysOf(pl Place, stack snapshot.StackID) placeKeys {
	return placeKeys{key: pl.Key(), leak: placeKey(pl, stack)}
}

// event is the place of trace event i's stack, placed as alloc places a
// block allocated there.
func (p *placer) event(i int) Place {
	e := p.tl.Trace.At(i)
	pl := p.stack(e.Stack)
	if !p.engineThread(e.Stack, pl) {
		return pl
	}
	return inCall(pl, p.scan().during(i))
}

// engineThread reports whether a stack, placed at pl, may be the autograd
// engine's thread: without Python frames of the user's, and either without
// Python at all or running library Python from the engine (a backward
// hook, which the scan's per-stack memo tells from the main thread's
// Python). User code in a hook keeps its own line.
func (p *placer) engineThread(id snapshot.StackID, pl Place) bool {
	if engineSite(pl.Site) {
		return true
	}
	return pl.Site.Reason == callsite.ReasonLibraryOnly && !p.scan().hasPython(id)
}

// scan is the placer's engineScan, made on first use.
func (p *placer) scan() *engineScan {
	if p.engine == nil {
		p.engine = newEngineScan(p.sn, p.tl.Trace, p.f)
	}
	return p.engine
}

// inCall is the place of a block allocated by the autograd engine's
// thread during call, whose stack's own place is pl: the call, or pl when
// there is none.
func inCall(pl Place, call *BackwardCall) Place {
	if call == nil {
		return pl
	}
	node := call.withNode(pl.Site)
	return Place{Site: node.Site, Backward: node, stack: call.stack}
}

// frames are a place's user frames, innermost first.
func (p *placer) frames(pl Place) []snapshot.Frame {
	return p.f.UserFrames(p.sn, pl.stack, stackDepth)
}

// placeFinding fills a Finding's callsite fields from a place: the
// callsite and its stack (siteFinding), and the origin and the frames
// from it to the callsite where it lies below the callsite.
func placeFinding(fd *Finding, pl Place, stack []snapshot.Frame) {
	siteFinding(fd, pl.Site, stack)
	switch {
	case pl.Backward != nil:
		fr := Frame{Function: pl.Backward.Node, File: callsite.BackwardFile}
		switch {
		case pl.Backward.Hook.Known():
			fr = NewFrame(pl.Backward.Hook.Frame)
		case fr.Function == "":
			fr.Function = "autograd engine"
		}
		fd.Origin = &fr
		fd.Evidence["allocated_by"] = pl.Backward.String()
		fd.Evidence["allocated_by_confidence"] = pl.Backward.Confidence
		fd.Evidence["allocated_by_evidence"] = pl.Backward.Evidence
	case pl.Origin.Below(pl.Site):
		fr := NewFrame(pl.Origin.Frame)
		fd.Origin = &fr
		fd.AllocatedVia = NewStack(pl.Origin.Via)
	}
}
