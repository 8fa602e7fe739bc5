package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/snapshot"
)

// BackwardCall is a backward() (or torch.autograd.grad()) call of the
// program, to which the blocks of the autograd engine's thread belong: that
// thread runs no Python, so its allocations have an empty stack with
// stacks="python" and C++ frames alone with stacks="all". The main thread
// waits inside the call meanwhile, so its events just before and after such
// blocks tell which call it was.
type BackwardCall struct {
	// Site is the user's line that made the call.
	Site callsite.Site
	// API is what was called: "backward()" or "torch.autograd.grad()".
	API string
	// Node is the autograd node that allocated (LogSoftmaxBackward0), when
	// C++ frames name it; "" with stacks="python".
	Node string
	// Hook is the library's Python code that the engine ran and that
	// allocated (a backward hook, or a custom Function's backward such as
	// FSDP's reduce-scatter), when there is one.
	Hook callsite.Origin
	// Confidence is "high" when the main thread's last event before the
	// blocks is inside the call (it entered the call and ran nothing
	// since), "medium" when only its next event after them is.
	Confidence string
	// Evidence says which events decided it.
	Evidence string
	stack    snapshot.StackID
}

func (c *BackwardCall) String() string {
	s := "the autograd engine during " + c.API + " at " + siteName(c.Site)
	if c.Node != "" {
		s += " (" + c.Node + ")"
	}
	if c.Hook.Known() {
		s += ", in " + c.Hook.String()
	}
	return s
}

// withNode is c for a block whose own site is site: the autograd node
// where its C++ frames name one, or the library's Python code that a
// backward hook ran on the engine's thread (FSDP's reduce-scatter buffers:
// "allocate (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:59)").
func (c *BackwardCall) withNode(site callsite.Site) *BackwardCall {
	n := *c
	switch {
	case site.Known() && site.Frame.Filename == callsite.BackwardFile:
		n.Node = site.Frame.Name
	case site.Reason == callsite.ReasonLibraryOnly && site.Frame.Line > 0:
		n.Hook = callsite.Origin{Frame: site.Frame, Depth: site.Depth}
	}
	return &n
}

// engineSite reports whether a site may be the autograd engine's thread: no
// Python frame of the user's, and an empty stack or C++ frames alone (an
// autograd node, or the operator the node ran). Library Python code that a
// backward hook ran on that thread is told by its stack (engineStack).
func engineSite(s callsite.Site) bool {
	switch {
	case s.Known():
		return s.Frame.Filename == callsite.BackwardFile
	case s.Reason == callsite.ReasonEmptyStack || s.Reason == callsite.ReasonEmptyStackAll:
		return true
	}
	return s.Reason == callsite.ReasonLibraryOnly && s.Frame.Line == 0
}

// engineScan finds the backward() call around trace events without Python
// frames, memoized per stack and per run of such events (allocations are
// asked in trace order, and a run of the engine's events is long).
type engineScan struct {
	sn     *snapshot.Snapshot
	events *snapshot.Cursor
	n      int // events
	f      *callsite.Filter
	// python memoizes hasPython by stack id (0: not known yet, 1: no, 2:
	// yes): a byte a stack, not a map, as it is asked about nearly every
	// event of a pass. calls memoizes callOf, asked once per run of events.
	python []uint8
	calls  map[snapshot.StackID]*BackwardCall
	// run is the last run of events without Python frames asked about:
	// events lo < i < hi, and its call.
	lo, hi int
	call   *BackwardCall
}

func newEngineScan(sn *snapshot.Snapshot, tr snapshot.Trace, f *callsite.Filter) *engineScan {
	return &engineScan{sn: sn, events: tr.Cursor(), n: tr.Len(), f: f, python: make([]uint8, sn.NumStacks()), calls: map[snapshot.StackID]*BackwardCall{}, lo: -1, hi: -1}
}

// during returns the backward() call that event i happened in, judged by
// the nearest events on either side with Python frames; nil when neither
// is inside one.
func (s *engineScan) during(i int) *BackwardCall {
	if s.lo < i && i < s.hi {
		return s.call
	}
	// The stacks of lo and hi are kept as they are met: reading those
	// events again moved the cursor back and forth across its blocks,
	// unpacking each anew (a third of the breakdown's pass over the 996 MB
	// bench file).
	lo, hi := i-1, i+1
	loStack, hiStack := snapshot.NoStack, snapshot.NoStack
	for ; lo >= 0; lo-- {
		if id := s.events.At(lo).Stack; s.hasPython(id) {
			loStack = id
			break
		}
	}
	for ; hi < s.n; hi++ {
		if id := s.events.At(hi).Stack; s.hasPython(id) {
			hiStack = id
			break
		}
	}
	s.lo, s.hi, s.call = lo, hi, nil
	var before, after *BackwardCall
	if lo >= 0 {
		before = s.callOf(loStack)
	}
	if hi < s.n {
		after = s.callOf(hiStack)
	}
	switch {
	case before != nil:
		c := *before
		c.Confidence = "high"
		c.Evidence = fmt.Sprintf("the main thread's last event before these blocks (event %d) is inside %s at %s", lo, c.API, siteName(c.Site))
		if after != nil && after.Site.Key() == before.Site.Key() {
			c.Evidence += fmt.Sprintf(", and so is its next one after them (event %d)", hi)
		}
		s.call = &c
	case after != nil:
		c := *after
		c.Confidence = "medium"
		c.Evidence = fmt.Sprintf("the main thread's next event after these blocks (event %d) is inside %s at %s; its last one before them (event %d) is not", hi, c.API, siteName(c.Site), lo)
		s.call = &c
	}
	return s.call
}

// hasPython reports whether a stack is the main thread's (or another
// Python thread's): it has a Python frame and is not the autograd engine's
// thread running a Python backward hook.
func (s *engineScan) hasPython(id snapshot.StackID) bool {
	if id == snapshot.NoStack {
		return false
	}
	if known := s.python[id]; known != 0 {
		return known == 2
	}
	py := false
	for _, fid := range s.sn.Stack(id) {
		if fr := s.sn.Frames[fid]; fr.Line != 0 && fr.Line != snapshot.UnknownLine && strings.HasSuffix(fr.Filename, ".py") {
			py = true
			break
		}
	}
	py = py && !engineStack(s.sn, id)
	s.python[id] = 1
	if py {
		s.python[id] = 2
	}
	return py
}

// engineStack reports whether a stack with Python frames is the autograd
// engine's thread running Python: a backward hook or a custom Function's
// backward, as FSDP's post-backward reduce-scatter is. With stacks="all"
// the engine's C++ thread loop is on the stack; with Python frames alone,
// the outermost frame is torch's entry into Python code from the engine
// (a custom Function's apply, or a hook), where the main thread's stacks
// reach up to the program's own module.
func engineStack(sn *snapshot.Snapshot, id snapshot.StackID) bool {
	stack := sn.Stack(id)
	var outer snapshot.Frame
	for _, fid := range stack {
		fr := sn.Frames[fid]
		if strings.HasPrefix(fr.Name, "torch::autograd::Engine::thread_main") {
			return true
		}
		if strings.HasSuffix(fr.Filename, ".py") {
			outer = fr
		}
	}
	file := strings.ReplaceAll(outer.Filename, `\`, "/")
	return outer.Name == "apply" && strings.HasSuffix(file, "torch/autograd/function.py") ||
		strings.Contains(file, "torch/distributed/") && strings.Contains(outer.Name, "backward")
}

// callOf returns the backward() call a stack is inside, or nil.
func (s *engineScan) callOf(id snapshot.StackID) *BackwardCall {
	c, ok := s.calls[id]
	if ok {
		return c
	}
	api := ""
	for _, fid := range s.sn.Stack(id) {
		// The outermost entry names the call: grad() runs the engine
		// through _engine_run_backward too.
		if a := backwardEntry(s.sn.Frames[fid]); a != "" {
			api = a
		}
	}
	if api != "" {
		if site := s.f.Site(s.sn, id); site.Known() {
			c = &BackwardCall{Site: site, API: api, stack: id}
		}
	}
	s.calls[id] = c
	return c
}

// backwardEntry names the autograd API whose frame fr is: torch's Python
// entry points of a backward pass (and, with stacks="all", the C++ one the
// main thread waits in), or "".
func backwardEntry(fr snapshot.Frame) string {
	file := strings.ReplaceAll(fr.Filename, `\`, "/")
	switch {
	case fr.Name == "backward" && (strings.HasSuffix(file, "torch/_tensor.py") || strings.HasSuffix(file, "torch/autograd/__init__.py")):
		return "backward()"
	case fr.Name == "_engine_run_backward" && strings.HasSuffix(file, "torch/autograd/graph.py"):
		return "backward()"
	case fr.Name == "grad" && strings.HasSuffix(file, "torch/autograd/__init__.py"):
		return "torch.autograd.grad()"
	}
	return ""
}
