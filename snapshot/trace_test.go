package snapshot

import (
	"testing"
	"unsafe"
)

// Events stay 32 bytes; contexts other than the first event's live in a
// column that only chunks holding such an event pay for.
func TestTraceContexts(t *testing.T) {
	if n := unsafe.Sizeof(Event{}); n != 32 {
		t.Errorf("Event is %d bytes, want 32", n)
	}
	first, compiled, tagged := Context{CompileContext: 1}, Context{CompileContext: 2}, Context{CompileContext: 1, UserMetadata: 3}
	n := 2*eventChunkLen + 10
	events, contexts := make([]Event, n), make([]Context, n)
	special := map[int]Context{7: compiled, eventChunkLen + 1: tagged, 2*eventChunkLen + 9: compiled}
	for i := range contexts {
		events[i].Addr = uint64(i)
		contexts[i] = first
		if c, ok := special[i]; ok {
			contexts[i] = c
		}
	}
	tr := NewTrace(events, contexts)
	for _, i := range []int{0, 6, 7, 8, eventChunkLen, eventChunkLen + 1, eventChunkLen + 2, 2*eventChunkLen + 9} {
		if got := tr.Context(i); got != contexts[i] || tr.At(i).Addr != uint64(i) {
			t.Errorf("event %d: context %+v, addr %d; want %+v, %d", i, got, tr.At(i).Addr, contexts[i], i)
		}
	}
	if got := len(tr.arena.contexts); got != 3 {
		t.Errorf("%d distinct contexts, want 3", got)
	}
	if c := tr.arena.ctx; len(c) != 3 || c[0] == nil || c[1] == nil || c[2] == nil {
		t.Errorf("context column chunks %d, want one per chunk with a special event", len(c))
	}
	if got := NewTrace(events[:10], nil); got.arena.ctx != nil || got.Context(3) != (Context{}) {
		t.Errorf("a trace of one context has a column or a wrong context")
	}
}
