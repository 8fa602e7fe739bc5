package snapshot

import (
	"iter"

	"github.com/vramscope/vramscope/internal/hugepage"
)

// eventChunkBits sizes the event arena's chunks (256k events, 8 MiB). Chunks
// are never reallocated, so a trace of N events costs N*32 bytes with no
// slice-doubling copies (the prototype in shared/research/pickle-bench.md
// measured 1.6x speed and 2.5x less peak RSS from this alone). An 8 MiB
// chunk holds at least three whole 2 MiB huge pages wherever it lands.
const eventChunkBits = 18

const eventChunkLen = 1 << eventChunkBits

// eventArena is an append-only, chunked []Event with the events' contexts.
type eventArena struct {
	chunks [][]Event
	n      int
	// contexts holds the distinct contexts, the first event's first. An
	// event's index into it is kept in ctx, in chunks like the events',
	// only once a chunk has an event whose context is not the first one:
	// a missing chunk or a zero means contexts[0].
	contexts []Context
	ctxIndex map[Context]uint32
	ctx      [][]uint32
}

func (a *eventArena) push(e Event, c Context) int {
	i := a.n
	k := i >> eventChunkBits
	if k == len(a.chunks) {
		// The first chunk starts small and grows, so that small snapshots
		// do not pay for 8 MiB; later ones are allocated whole, on huge
		// pages.
		c := eventChunkLen
		if k == 0 {
			c = 256
		}
		ch := make([]Event, 0, c)
		hugepage.Advise(ch)
		a.chunks = append(a.chunks, ch)
	}
	a.chunks[k] = append(a.chunks[k], e)
	a.n++
	if len(a.contexts) == 0 || c != a.contexts[0] {
		a.setContext(i, c)
	}
	return i
}

// setContext records c as event i's context.
func (a *eventArena) setContext(i int, c Context) {
	if len(a.contexts) == 0 {
		a.contexts = []Context{c}
		a.ctxIndex = map[Context]uint32{c: 0}
		return
	}
	id, ok := a.ctxIndex[c]
	if !ok {
		id = uint32(len(a.contexts))
		a.contexts = append(a.contexts, c)
		a.ctxIndex[c] = id
	}
	k := i >> eventChunkBits
	for len(a.ctx) <= k {
		a.ctx = append(a.ctx, nil)
	}
	if a.ctx[k] == nil {
		a.ctx[k] = make([]uint32, eventChunkLen)
	}
	a.ctx[k][i&(eventChunkLen-1)] = id
}

// appendArena moves the events of t (a tail decoded apart, split.go) to the
// end of a, with ctx renumbering their contexts; t is left empty. Where
// every context is the first one, t's chunks are reused in place, each
// event moved once, so the merge needs no second copy of the tail.
func (a *eventArena) appendArena(t *eventArena, ctx func(Context) Context) {
	if t.n == 0 {
		return
	}
	if a.n == 0 || len(t.ctx) > 0 || ctx(t.contexts[0]) != a.contexts[0] {
		for i := range t.n {
			a.push(*t.at(i), ctx(t.context(i)))
		}
		*t = eventArena{}
		return
	}
	src := t.chunks
	// Fill a's last chunk, then shift t's events down by as many, chunk by
	// chunk: a chunk takes the rest of its own events and the head of the
	// next one's.
	taken := 0
	if k := len(a.chunks) - 1; len(a.chunks[k]) < eventChunkLen {
		room := eventChunkLen - len(a.chunks[k])
		for j := 0; j < len(src) && taken < room; j++ {
			n := min(room-taken, len(src[j]))
			a.chunks[k] = append(a.chunks[k], src[j][:n]...)
			taken += n
		}
	}
	if taken < t.n {
		shift := taken % eventChunkLen // taken < eventChunkLen: src[0] is full if taken > 0
		for j := range src {
			c := src[j]
			n := copy(c, c[min(shift, len(c)):])
			c = c[:n]
			if j+1 < len(src) {
				c = append(c, src[j+1][:min(shift, len(src[j+1]))]...)
			}
			if len(c) > 0 {
				a.chunks = append(a.chunks, c)
			}
		}
	}
	a.n += t.n
	*t = eventArena{}
}

func (a *eventArena) at(i int) *Event {
	return &a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)]
}

func (a *eventArena) context(i int) Context {
	if len(a.contexts) == 0 {
		return Context{}
	}
	if k := i >> eventChunkBits; k < len(a.ctx) && a.ctx[k] != nil {
		return a.contexts[a.ctx[k][i&(eventChunkLen-1)]]
	}
	return a.contexts[0]
}

// Trace is one device's chronological event list.
type Trace struct {
	arena *eventArena
	off   int
	n     int
}

// NewTrace builds a Trace from events (for tests and synthetic inputs);
// contexts, if not nil, holds each event's context.
func NewTrace(events []Event, contexts []Context) Trace {
	a := &eventArena{}
	for i, e := range events {
		var c Context
		if contexts != nil {
			c = contexts[i]
		}
		a.push(e, c)
	}
	return Trace{arena: a, n: len(events)}
}

// Len is the number of events.
func (t Trace) Len() int { return t.n }

// At returns event i (0 <= i < Len). The pointer stays valid for the
// snapshot's lifetime.
func (t Trace) At(i int) *Event {
	if i < 0 || i >= t.n {
		panic("snapshot: trace index out of range")
	}
	return t.arena.at(t.off + i)
}

// Context returns event i's compile context and user metadata.
func (t Trace) Context(i int) Context {
	if i < 0 || i >= t.n {
		panic("snapshot: trace index out of range")
	}
	return t.arena.context(t.off + i)
}

// All iterates over the events in order.
func (t Trace) All() iter.Seq2[int, *Event] {
	return func(yield func(int, *Event) bool) {
		for i := 0; i < t.n; i++ {
			if !yield(i, t.arena.at(t.off+i)) {
				return
			}
		}
	}
}
