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
}

func newPlacer(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *placer {
	return &placer{sn: sn, tl: tl, f: f, byStack: map[snapshot.StackID]Place{}}
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
	a := p.tl.Allocation(k)
	pl := p.stack(a.Stack)
	if a.Start == replay.BeforeRecording || !p.engineThread(a.Stack, pl) {
		return pl
	}
	return p.engineAt(int(a.Start), pl)
}

// event is the place of trace event i's stack, placed as alloc places a
// block allocated there.
func (p *placer) event(i int) Place {
	e := p.tl.Trace.At(i)
	pl := p.stack(e.Stack)
	if !p.engineThread(e.Stack, pl) {
		return pl
	}
	return p.engineAt(i, pl)
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

// engineAt is the place of a block allocated at event i by a thread
// without Python frames, whose stack's own place is pl: the backward()
// call it happened in, or pl when none is found.
func (p *placer) engineAt(i int, pl Place) Place {
	call := p.scan().during(i)
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
