package snapshot

import (
	"fmt"
	"iter"
	"slices"

	"github.com/vramscope/vramscope/internal/parallel"
)

// eventChunkBits sizes the event arena's chunks (64k events, 1.25 MiB). Chunks
// are never reallocated, so a trace of N events costs N*20 bytes with no
// slice-doubling copies (the prototype in shared/research/pickle-bench.md
// measured 1.6x speed and 2.5x less peak RSS from this alone). Each part
// of a split decode fills its last chunk partly: with 5 MiB chunks the 16
// parts on 16 cores left 40 MB unused at the decode's peak, and analyze of
// the 996 MB bench file peaked at 542 MB live instead of 464-485 (with the
// memo's chunks cut likewise), in no more time (bench/RESULTS.md).
const eventChunkBits = 16

const eventChunkLen = 1 << eventChunkBits

// packedEvent is an Event in 20 bytes instead of 32 (137 MB less on the
// 11.4 M events of the 996 MB bench file): the address keeps 48 bits, with
// the action, the stream id and the time's epoch above them, the size 40
// bits (1 TiB), with the stack id above, and the time its low 32 bits. A
// trace's times are microseconds since the Unix epoch, whose high 32 bits
// change every 71 minutes: the epoch is how many times they changed since
// the arena's first event (eventArena.timeBase), up to 15 (19 hours). Words
// of 32 bits keep the struct at 20 bytes, where two uint64s and a uint32
// would be padded to 24. An event whose values do not fit (none in any real
// trace: addresses are user-space pointers, streams and stacks are few) is
// kept whole in the arena's wide table, which its size word then indexes.
type packedEvent struct {
	addrLo, addrHi uint32 // Addr | Stream<<48 | Action<<56 | epoch<<60, or packWideAddr
	sizeLo, sizeHi uint32 // Size | Stack<<40, or an index into eventArena.wide
	timeLo         uint32 // TimeUS's low 32 bits
}

func (p *packedEvent) addr() uint64 { return uint64(p.addrLo) | uint64(p.addrHi)<<32 }
func (p *packedEvent) size() uint64 { return uint64(p.sizeLo) | uint64(p.sizeHi)<<32 }

func (p *packedEvent) setAddr(w uint64) { p.addrLo, p.addrHi = uint32(w), uint32(w>>32) }
func (p *packedEvent) setSize(w uint64) { p.sizeLo, p.sizeHi = uint32(w), uint32(w>>32) }

const (
	packAddrBits   = 48
	packSizeBits   = 40
	packStreamBits = packAddrBits
	packActionBits = packStreamBits + 8
	packEpochBits  = packActionBits + 4
	packWide       = 15         // no action has this number
	packWideAddr   = ^uint64(0) // the addr word of an event kept in wide: action packWide
	packStreams    = 1 << 8
	packEpochs     = 1 << 4
	packStacks     = 1 << 24
)

// eventArena is an append-only, chunked []Event with the events' contexts.
type eventArena struct {
	chunks [][]packedEvent
	wide   []Event
	// timeBase is the first event's time without its low 32 bits: the
	// events' epochs count from it.
	timeBase uint64
	n        int
	// contexts holds the distinct contexts, the first event's first. An
	// event's index into it is kept in ctx, in chunks like the events',
	// only once a chunk has an event whose context is not the first one:
	// a missing chunk or a zero means contexts[0].
	contexts []Context
	ctxIndex map[Context]uint32
	ctx      [][]uint32
	// others lists, in order, the indices of the events that are not
	// block events (Trace.Others).
	others []int
}

// isBlockEvent reports whether a is an alloc or a free: the actions of
// nearly every event of a trace.
func isBlockEvent(a Action) bool {
	return a == ActionAlloc || a == ActionFreeRequested || a == ActionFreeCompleted
}

// pack packs e into p, keeping it in a.wide if it does not fit. It
// writes p's words in place: a packedEvent built apart and then copied
// into the chunk was read back before its halves' stores had landed,
// which stalled each push (BenchmarkPush: 33-38 ns an event, against
// 14-21 ns in place).
func (a *eventArena) pack(p *packedEvent, e Event) {
	epoch := (uint64(e.TimeUS) - a.timeBase) >> 32
	if e.Addr>>packAddrBits|e.Size>>packSizeBits|uint64(e.Stream)/packStreams|uint64(e.Stack)/packStacks|epoch/packEpochs == 0 &&
		e.Action < packWide {
		p.setAddr(e.Addr | uint64(e.Stream)<<packStreamBits | uint64(e.Action)<<packActionBits | epoch<<packEpochBits)
		p.setSize(e.Size | uint64(e.Stack)<<packSizeBits)
		p.timeLo = uint32(e.TimeUS)
		return
	}
	*p = a.packWide(e)
}

func (a *eventArena) packWide(e Event) packedEvent {
	a.wide = append(a.wide, e)
	var p packedEvent
	p.setAddr(packWideAddr)
	p.setSize(uint64(len(a.wide) - 1))
	return p
}

// at is event i, a call per Trace.At, with narrow inlined in it: as a
// call of its own behind at, the unpacking cost 19 ns an event instead of
// 5 (BenchmarkTraceAt). The time's high bits are in the address word, not
// looked up: as a second call per event, from a list of epochs, they cost
// the replay of the 996 MB bench file 0.6 s more CPU time on 16 cores.
func (a *eventArena) at(i int) (e Event) {
	p := &a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)]
	if p.addr() == packWideAddr {
		return a.wide[p.size()]
	}
	narrow(&e, a.timeBase, p)
	return e
}

// narrow sets e to the event p, which is not kept in wide, whose epochs
// count from timeBase. It is small enough to be inlined, so unpackTo,
// which passes over many events, makes no call per event.
func narrow(e *Event, timeBase uint64, p *packedEvent) {
	hi, sizeHi := p.addrHi, p.sizeHi
	e.Addr = uint64(p.addrLo) | uint64(uint16(hi))<<32
	e.Size = uint64(p.sizeLo) | uint64(uint8(sizeHi))<<32
	e.TimeUS = int64(timeBase + uint64(hi>>(packEpochBits-32))<<32 | uint64(p.timeLo))
	e.Stack = StackID(sizeHi >> (packSizeBits - 32))
	e.Stream = StreamID(uint8(hi >> (packStreamBits - 32)))
	e.Action = Action(hi >> (packActionBits - 32) & 15)
}

// narrow reads the address from the low 16 bits of addrHi and the size
// from the low 8 of sizeHi: this fails to compile if packAddrBits or
// packSizeBits change.
const _ = -uint(packAddrBits-48) - uint(packSizeBits-40)

// unpackTo unpacks src into dst (len(dst) >= len(src)).
func (a *eventArena) unpackTo(dst []Event, src []packedEvent) {
	dst = dst[:len(src)]
	for j := range src {
		p := &src[j]
		if p.addr() == packWideAddr {
			dst[j] = a.wide[p.size()]
			continue
		}
		narrow(&dst[j], a.timeBase, p)
	}
}

// rebase makes the epochs of a's events count from base: a tail's arena
// (split.go) joining the head's, whose first event was in another epoch.
// The events that then do not fit are kept whole.
func (a *eventArena) rebase(base uint64) {
	for _, c := range a.chunks {
		for j := range c {
			p := &c[j]
			if addr := p.addr(); addr != packWideAddr {
				var e Event
				narrow(&e, a.timeBase, p)
				epoch := (uint64(e.TimeUS) - base) >> 32
				if epoch >= packEpochs {
					*p = a.packWide(e)
					continue
				}
				p.setAddr(addr&(1<<packEpochBits-1) | epoch<<packEpochBits)
			}
		}
	}
	a.timeBase = base
}

func (a *eventArena) push(e Event, c Context) int {
	i := a.n
	k := i >> eventChunkBits
	if k == len(a.chunks) {
		// The first chunk starts small and grows, so that small snapshots
		// do not pay for a whole one; later ones are allocated whole.
		c := eventChunkLen
		if k == 0 {
			c = 256
		}
		ch := make([]packedEvent, 0, c)
		a.chunks = append(a.chunks, ch)
	}
	if i == 0 {
		a.timeBase = uint64(e.TimeUS) &^ (1<<32 - 1)
	}
	ch := a.chunks[k]
	if len(ch) == cap(ch) { // the first chunk, growing
		ch = append(ch, packedEvent{})[:len(ch)]
	}
	ch = ch[:len(ch)+1]
	a.pack(&ch[len(ch)-1], e)
	a.chunks[k] = ch
	if !isBlockEvent(e.Action) {
		a.others = append(a.others, i)
	}
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

// renumber maps the stack and stream ids of a's events (a tail decoded
// apart, split.go, whose ids are its own) through stackOf and streams. It
// works on the packed words, a chunk per core: 5 M events cost about 20 ms
// on one core, against about 200 ms to unpack, map and pack each, and the
// head of a split decode waits for each tail's. An event whose new ids do
// not pack is left to the end, where it moves to the wide events.
func (a *eventArena) renumber(stackOf func(StackID) StackID, streams []StreamID) {
	for i := range a.wide {
		e := &a.wide[i]
		e.Stack, e.Stream = stackOf(e.Stack), streams[e.Stream]
	}
	bounds := parallel.Ranges(len(a.chunks), 1)
	spilled := make([][]int, len(bounds)-1)
	parallel.Do(bounds, func(part, lo, hi int) {
		for k, c := range a.chunks[lo:hi] {
			for j := range c {
				p := &c[j]
				addr, size := p.addr(), p.size()
				if addr == packWideAddr {
					continue
				}
				stack, stream := stackOf(StackID(size>>packSizeBits)), streams[uint8(addr>>packStreamBits)]
				if int(stack) >= packStacks || int(stream) >= packStreams {
					spilled[part] = append(spilled[part], (lo+k)<<eventChunkBits|j)
					continue
				}
				p.setSize(size&(1<<packSizeBits-1) | uint64(stack)<<packSizeBits)
				p.setAddr(addr&^((packStreams-1)<<packStreamBits) | uint64(stream)<<packStreamBits)
			}
		}
	})
	for _, is := range spilled {
		for _, i := range is {
			e := a.at(i)
			e.Stack, e.Stream = stackOf(e.Stack), streams[e.Stream]
			a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)] = a.packWide(e)
		}
	}
}

// appendArena moves the events of t (a tail decoded apart and renumbered,
// split.go) to the end of a, with ctx renumbering their contexts; t is
// left empty. Where every context is the first one, t's chunks are reused
// in place, each event moved once, so the merge needs no second copy of
// the tail.
func (a *eventArena) appendArena(t *eventArena, ctx func(Context) Context) {
	if t.n == 0 {
		return
	}
	if a.n == 0 || len(t.ctx) > 0 || ctx(t.contexts[0]) != a.contexts[0] {
		for i := range t.n {
			a.push(t.at(i), ctx(t.context(i)))
		}
		*t = eventArena{}
		return
	}
	if t.timeBase != a.timeBase {
		t.rebase(a.timeBase)
	}
	src := t.chunks
	if len(t.wide) > 0 {
		for _, c := range src {
			for j := range c {
				if p := &c[j]; p.addr() == packWideAddr {
					p.setSize(p.size() + uint64(len(a.wide)))
				}
			}
		}
		a.wide = append(a.wide, t.wide...)
	}
	a.appendCut(t.cutFor(a.n))
}

// tailChunks are a tail's events cut to follow the n events of an arena
// (cutFor): head fills that arena's last chunk and chunks follow it whole.
type tailChunks struct {
	n      int
	head   []packedEvent
	chunks [][]packedEvent
	events int
	others []int // the indices among the tail's events of those not block events
}

// cutFor cuts t's events, which are to follow the n events of another
// arena, so that appendCut puts them there without moving them again: the
// first, as many as that arena's last chunk has room for, go to head, and
// the rest move down so that each of t's chunks starts where one of that
// arena's will. It reads and writes t alone, so a merged tail is cut while
// the tails before it are still being appended (split.go); t is left
// empty.
func (t *eventArena) cutFor(n int) tailChunks {
	c := tailChunks{n: n, events: t.n, others: t.others}
	room := min((eventChunkLen-n%eventChunkLen)%eventChunkLen, t.n)
	src := t.chunks
	for j := 0; j < len(src) && len(c.head) < room; j++ {
		c.head = append(c.head, src[j][:min(room-len(c.head), len(src[j]))]...)
	}
	if room < t.n {
		// Each chunk takes the rest of its own events and the first of the
		// next one's (room < eventChunkLen: src[0] is full if room > 0).
		for j := range src {
			k := src[j]
			m := copy(k, k[min(room, len(k)):])
			k = k[:m]
			if j+1 < len(src) {
				k = append(k, src[j+1][:min(room, len(src[j+1]))]...)
			}
			if len(k) > 0 {
				c.chunks = append(c.chunks, k)
			}
		}
	}
	*t = eventArena{}
	return c
}

// appendCut appends a tail's events cut for a's length (cutFor).
func (a *eventArena) appendCut(c tailChunks) {
	if a.n != c.n {
		panic(fmt.Sprintf("snapshot: events cut to follow %d events appended after %d", c.n, a.n))
	}
	for _, i := range c.others {
		a.others = append(a.others, a.n+i)
	}
	if len(c.head) > 0 {
		k := len(a.chunks) - 1
		a.chunks[k] = append(a.chunks[k], c.head...)
	}
	a.chunks = append(a.chunks, c.chunks...)
	a.n += c.events
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

// At returns event i (0 <= i < Len).
func (t Trace) At(i int) Event {
	if uint(i) >= uint(t.n) {
		panic("snapshot: trace index out of range")
	}
	return t.arena.at(t.off + i)
}

// Events fills dst with events i, i+1, ... up to len(dst) or the last
// one (0 <= i <= Len), and returns the filled part. The passes over every
// event read them so, a block at a time: an event unpacked by At is a
// call, one by Events is not (5 ns against 3 an event in a loop over 1 M
// events on this VM, BenchmarkTraceAt and BenchmarkTraceEvents).
func (t Trace) Events(dst []Event, i int) []Event {
	if uint(i) > uint(t.n) {
		panic("snapshot: trace index out of range")
	}
	dst = dst[:min(len(dst), t.n-i)]
	for got, k := 0, t.off+i; got < len(dst); {
		c := t.arena.chunks[k>>eventChunkBits][k&(eventChunkLen-1):]
		c = c[:min(len(c), len(dst)-got)]
		t.arena.unpackTo(dst[got:], c)
		got += len(c)
		k += len(c)
	}
	return dst
}

// eventsBlock is how many events All and a Cursor unpack at once: 16 KiB.
const eventsBlock = 512

// Cursor reads the events of a trace a block at a time, for passes that
// read events in order, forwards or backwards, or near one another. Its At
// is inlined: about 5 ns an event in order, as much as Trace.At's call
// since that unpacks in one call instead of two (it cost 20;
// BenchmarkTraceCursor, BenchmarkTraceAt).
type Cursor struct {
	tr    Trace
	first int // of the block in buf
	buf   []Event
	block [eventsBlock]Event
}

// Cursor returns a cursor over t's events.
func (t Trace) Cursor() *Cursor { return &Cursor{tr: t} }

// At returns event i (0 <= i < Len).
func (c *Cursor) At(i int) Event {
	if uint(i-c.first) >= uint(len(c.buf)) {
		c.fill(i)
	}
	return c.buf[i-c.first]
}

// fill reads the block that holds event i, blocks counted from the
// trace's first event.
func (c *Cursor) fill(i int) {
	if uint(i) >= uint(c.tr.n) {
		panic("snapshot: trace index out of range")
	}
	c.first = i &^ (eventsBlock - 1)
	c.buf = c.tr.Events(c.block[:], c.first)
}

// Context returns event i's compile context and user metadata.
func (t Trace) Context(i int) Context {
	if i < 0 || i >= t.n {
		panic("snapshot: trace index out of range")
	}
	return t.arena.context(t.off + i)
}

// Others iterates in order over the events that are not block events
// (alloc, free_requested, free_completed): segment events, snapshot()
// calls, OOMs, annotations, unknown actions. A trace of millions of events
// has a few of them, which this finds without reading the rest (a pass
// over the 11.4 M events of the 996 MB bench file costs about 0.1 s).
func (t Trace) Others() iter.Seq2[int, Event] {
	return func(yield func(int, Event) bool) {
		if t.n == 0 {
			return
		}
		others := t.arena.others
		start, _ := slices.BinarySearch(others, t.off)
		for _, k := range others[start:] {
			if k >= t.off+t.n || !yield(k-t.off, t.arena.at(k)) {
				return
			}
		}
	}
}

// All iterates over the events in order.
func (t Trace) All() iter.Seq2[int, Event] {
	return func(yield func(int, Event) bool) {
		var buf [eventsBlock]Event
		for i := 0; i < t.n; {
			for _, e := range t.Events(buf[:], i) {
				if !yield(i, e) {
					return
				}
				i++
			}
		}
	}
}
