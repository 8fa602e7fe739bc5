package diagnose

import (
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/snapshot"
)

// Window is one record_function range of a device's trace: its name and
// the events First through End-1 recorded inside it.
type Window struct {
	Name       string
	First, End int
}

// AnnotationWindows returns device's paired record_function ranges as
// spans of tr's events, in order of their start: what the phases of a
// step (Optimizer.step#*, Optimizer.zero_grad#*, FSDP::*) are read from.
func AnnotationWindows(anns []snapshot.Annotation, device int, tr snapshot.Trace) []Window {
	ranges, _ := pairAnnotations(deviceAnnotations(anns, device))
	out := make([]Window, 0, len(ranges))
	from := 0
	for _, r := range ranges {
		first, end := eventSpan(tr, from, r.startUS, r.endUS)
		out = append(out, Window{Name: r.name, First: first, End: end})
		from = first
	}
	return out
}

// BackwardScan tells which backward() call a trace event without Python
// frames happened in, as findings place the autograd engine's blocks.
type BackwardScan struct{ s *engineScan }

// NewBackwardScan scans tr; f decides which frames are the user's.
func NewBackwardScan(sn *snapshot.Snapshot, tr snapshot.Trace, f *callsite.Filter) *BackwardScan {
	return &BackwardScan{s: newEngineScan(sn, tr, f)}
}

// During returns the backward() call that event i, whose stack is stack,
// happened in, or nil when stack has Python frames or no call surrounds
// it. The caller has the event: reading it here again unpacked each event
// of the breakdown's pass twice.
func (b *BackwardScan) During(i int, stack snapshot.StackID) *BackwardCall {
	if b.s.hasPython(stack) {
		return nil
	}
	return b.s.during(i)
}

// HasPython reports whether a stack is a Python thread's of the program
// (not the autograd engine's running a hook): the events that bound a run
// of the engine's, as During finds them.
func (b *BackwardScan) HasPython(stack snapshot.StackID) bool { return b.s.hasPython(stack) }

// InCall reports whether the events without Python frames between an event
// with stack before and the next with stack after, both with Python frames
// (NoStack: no such event), happened inside a backward() call: whether
// During of each of them is not nil. A pass over the events in order can
// so settle each run of them when it meets its end, without reading ahead.
func (b *BackwardScan) InCall(before, after snapshot.StackID) bool {
	return before != snapshot.NoStack && b.s.callOf(before) != nil || after != snapshot.NoStack && b.s.callOf(after) != nil
}

// BackwardEntry names the autograd API whose frame fr is ("backward()",
// "torch.autograd.grad()"), or "" when fr is none.
func BackwardEntry(fr snapshot.Frame) string { return backwardEntry(fr) }
