package snapshot

import (
	"fmt"
	"iter"
	"slices"

	"github.com/vramscope/vramscope/internal/parallel"
)

// eventChunkBits sizes the event arena's chunks (16k events, 256 KiB).
// Chunks are never reallocated, so a trace of N events costs N*16 bytes
// with no slice-doubling copies (the prototype in
// shared/research/pickle-bench.md measured 1.6x speed and 2.5x less peak
// RSS from this alone). Each part of a split decode fills its last chunk
// partly: with 5 MiB chunks the 16 parts on 16 cores left 40 MB unused at
// the decode's peak, and analyze of the 996 MB bench file peaked at 542 MB
// live instead of 464-485 (with the memo's chunks cut likewise), in no
// more time; with 1 MiB chunks the 288 MB bench file's 16-part decode held
// 9 MiB more than with these (bench/RESULTS.md).
const eventChunkBits = 14

const eventChunkLen = 1 << eventChunkBits

// packedEvent is a block event (an alloc or a free: nearly every event of
// a trace) in 16 bytes instead of 32 (182 MB less on the 11.4 M events of
// the 996 MB bench file). Its low word holds the time as microseconds
// since the arena's time base (36 bits: 19 hours), the action (2 bits),
// the stream id (4), the stack id (20) and the size's top 2 bits; its
// high word the address as 512-byte units from the arena's address base
// (33 bits: a window of 4 TiB, addrWindow) and the size's low 31 bits
// (33 in all: 8 GiB). The caching allocator hands out blocks in 512-byte
// units from segments in the process's address space, where the devices
// of a process share one arena and one window, so every block address of
// a real trace fits; requested sizes do not all round to 512 and are kept
// exact. Any other event, and a block event whose values do not fit, is
// kept whole in the arena's wide table: its action bits are 0 and its
// high word indexes the table.
type packedEvent struct {
	lo, hi uint64
}

const (
	packTimeBits    = 36
	packActionShift = packTimeBits
	packStreamShift = packActionShift + 2
	packStackShift  = packStreamShift + 4
	packSizeShift   = packStackShift + 20 // the size's top bits, in the low word
	packAddrBits    = 33
	packAddrUnit    = 9 // an address counts 512-byte units
	packSizeLow     = 64 - packAddrBits
	packSizeBits    = packSizeLow + 64 - packSizeShift
	packStreams     = 1 << (packStackShift - packStreamShift)
	packStacks      = 1 << (packSizeShift - packStackShift)
)

// wide reports whether p's event is kept whole, in the wide table at p.hi.
func (p *packedEvent) wide() bool { return p.lo>>packActionShift&3 == 0 }

// packedStack, packedStream and packedTime read the fields in lo, the low
// word of an event not kept whole: narrow, renumber and the one-field
// readers all read them so. They take the word, not the event: narrow,
// reading it through p after its stores to e, loaded it again for each
// (BenchmarkTraceEvents on one core: 3.4-3.7 ns an event, against 3.1-3.3
// taking the word).
func packedStack(lo uint64) StackID    { return StackID(lo >> packStackShift & (packStacks - 1)) }
func packedStream(lo uint64) StreamID  { return StreamID(lo >> packStreamShift & (packStreams - 1)) }
func packedTime(base, lo uint64) int64 { return int64(base + lo&(1<<packTimeBits-1)) }

// packBase is what an arena's packed events count from: their times from
// time, their addresses from addr. Until the arena's first block event
// sets addr, unbased is 1 and no event packs.
type packBase struct {
	time, addr, unbased uint64
}

// addrWindow is the address base for an arena whose first block event is
// at addr: 2 TiB below addr's 1 TiB-aligned region, so that the window
// holds at least 2 TiB below addr and 1 TiB above it. It depends on that
// region alone, so that the parts of a split decode, each of which sets
// its own base, mostly agree and join without repacking (rebase).
func addrWindow(addr uint64) uint64 {
	region := addr &^ (1<<40 - 1)
	return region - min(region, 2<<40)
}

// eventArena is an append-only, chunked []Event with the events' contexts.
type eventArena struct {
	chunks [][]packedEvent
	wide   []Event
	// wideAt holds the index of each event in wide, so that a tail's
	// are found when it joins another arena, whose wide table its own
	// then extends.
	wideAt []int
	// base is what the packed events count from: the time from the first
	// event's time without its low 32 bits, the address from addrWindow
	// of the first block event's.
	base packBase
	n    int
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

// The action bits hold a block event's action as it is: this fails to
// compile if the actions are renumbered.
const _ = -uint(ActionAlloc-1) - uint(ActionFreeRequested-2) - uint(ActionFreeCompleted-3)

// pack packs e, event i, into p, keeping it in a.wide if it does not fit. It
// writes p's words in place: a packedEvent built apart and then copied
// into the chunk was read back before its halves' stores had landed,
// which stalled each push (BenchmarkPush: 33-38 ns an event, against
// 14-21 ns in place).
func (a *eventArena) pack(p *packedEvent, i int, e *Event) {
	off, dt := e.Addr-a.base.addr, uint64(e.TimeUS)-a.base.time
	if off>>(packAddrBits+packAddrUnit)|off&(1<<packAddrUnit-1)|e.Size>>packSizeBits|dt>>packTimeBits|
		uint64(e.Stack)/packStacks|uint64(e.Stream)/packStreams|a.base.unbased == 0 && e.Action-1 < 3 {
		p.lo = dt | uint64(e.Action)<<packActionShift | uint64(e.Stream)<<packStreamShift | uint64(e.Stack)<<packStackShift |
			e.Size>>packSizeLow<<packSizeShift
		p.hi = off>>packAddrUnit | e.Size<<packAddrBits
		return
	}
	if a.base.unbased != 0 && isBlockEvent(e.Action) {
		// The first block event: every event before it is kept whole,
		// so the address base can be set now.
		a.base.addr, a.base.unbased = addrWindow(e.Addr), 0
		a.pack(p, i, e)
		return
	}
	*p = a.packWide(i, *e)
}

// packWide keeps e, event i, in a.wide and returns its packedEvent.
func (a *eventArena) packWide(i int, e Event) packedEvent {
	a.wide = append(a.wide, e)
	a.wideAt = append(a.wideAt, i)
	return packedEvent{hi: uint64(len(a.wide) - 1)}
}

// at is event i, a call per Trace.At, with narrow inlined in it: as a
// call of its own behind at, the unpacking cost 19 ns an event instead of
// 5 (BenchmarkTraceAt).
func (a *eventArena) at(i int) (e Event) {
	p := &a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)]
	if p.wide() {
		return a.wide[p.hi]
	}
	narrow(&e, &a.base, p.lo, p.hi)
	return e
}

// narrow sets e to the event packed from base in the words lo and hi,
// one not kept in wide. It is small enough to be inlined, so unpackTo,
// which passes over many events, makes no call per event; it takes the
// words, not the event, to stay so (budget 80: with the event and
// packedTime it cost 84).
func narrow(e *Event, base *packBase, lo, hi uint64) {
	e.TimeUS = packedTime(base.time, lo)
	e.Action = Action(lo >> packActionShift & 3)
	e.Stream = packedStream(lo)
	e.Stack = packedStack(lo)
	e.Addr = base.addr + hi&(1<<packAddrBits-1)<<packAddrUnit
	e.Size = hi>>packAddrBits | lo>>packSizeShift<<packSizeLow
}

// unpackTo unpacks src into dst (len(dst) >= len(src)).
func (a *eventArena) unpackTo(dst []Event, src []packedEvent) {
	dst = dst[:len(src)]
	for j := range src {
		p := &src[j]
		if p.wide() {
			dst[j] = a.wide[p.hi]
			continue
		}
		narrow(&dst[j], &a.base, p.lo, p.hi)
	}
}

// rebase packs a's events again to count from base: a tail's arena
// (split.go) joining the head's, whose first event was in another epoch
// or whose first block event was in another region of addresses. The
// events that then do not fit are kept whole.
func (a *eventArena) rebase(base packBase) {
	old := a.base
	a.base = base
	for k, c := range a.chunks {
		for j := range c {
			if p := &c[j]; !p.wide() {
				var e Event
				narrow(&e, &old, p.lo, p.hi)
				a.pack(p, k<<eventChunkBits|j, &e)
			}
		}
	}
}

// push appends e with its context c and returns its index. e comes by
// pointer, as pack takes it: by value its six fields went into registers
// and back to the stack at each of the decoder's three calls an event
// (60 M instructions of one core's analyze of the 288 MB bench file).
func (a *eventArena) push(e *Event, c Context) int {
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
		a.base = packBase{time: uint64(e.TimeUS) &^ (1<<32 - 1), unbased: 1}
	}
	ch := &a.chunks[k]
	if len(*ch) == cap(*ch) { // the first chunk, growing
		*ch = append(*ch, packedEvent{})[:len(*ch)]
	}
	// Resliced into itself, the chunk has only its length stored: written
	// back whole, its pointer took a write barrier's check.
	*ch = (*ch)[:len(*ch)+1]
	a.pack(&(*ch)[len(*ch)-1], i, e)
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
				if p.wide() {
					continue
				}
				stack, stream := stackOf(packedStack(p.lo)), streams[packedStream(p.lo)]
				if int(stack) >= packStacks || int(stream) >= packStreams {
					spilled[part] = append(spilled[part], (lo+k)<<eventChunkBits|j)
					continue
				}
				const ids = 1<<packSizeShift - 1<<packStreamShift // the stream's and the stack's bits
				p.lo = p.lo&^ids | uint64(stream)<<packStreamShift | uint64(stack)<<packStackShift
			}
		}
	})
	for _, is := range spilled {
		for _, i := range is {
			e := a.at(i)
			e.Stack, e.Stream = stackOf(e.Stack), streams[e.Stream]
			a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)] = a.packWide(i, e)
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
			e := t.at(i)
			a.push(&e, ctx(t.context(i)))
		}
		*t = eventArena{}
		return
	}
	if t.base.unbased == 0 && t.base != a.base {
		// t has packed events (only block events pack, once the base is
		// set). An arena with none yet takes t's address base.
		if a.base.unbased != 0 {
			a.base.addr, a.base.unbased = t.base.addr, 0
		}
		if t.base != a.base {
			t.rebase(a.base)
		}
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
	wide   []Event
	wideAt []int // the tail's wide and wideAt, which appendCut renumbers
}

// cutFor cuts t's events, which are to follow the n events of another
// arena, so that appendCut puts them there without moving them again: the
// first, as many as that arena's last chunk has room for, go to head, and
// the rest move down so that each of t's chunks starts where one of that
// arena's will. It reads and writes t alone, so a merged tail is cut while
// the tails before it are still being appended (split.go); t is left
// empty.
func (t *eventArena) cutFor(n int) tailChunks {
	c := tailChunks{n: n, events: t.n, others: t.others, wide: t.wide, wideAt: t.wideAt}
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
	for _, i := range c.wideAt {
		i += a.n
		a.chunks[i>>eventChunkBits][i&(eventChunkLen-1)].hi += uint64(len(a.wide))
		a.wideAt = append(a.wideAt, i)
	}
	a.wide = append(a.wide, c.wide...)
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
		a.push(&e, c)
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

// StackAt is At(i).Stack, with nothing else of the event unpacked: for the
// passes that ask a block's stack.
func (t Trace) StackAt(i int) StackID {
	p, wide := t.packed(i)
	if wide != nil {
		return wide.Stack
	}
	return packedStack(p.lo)
}

// TimeAt is At(i).TimeUS, with nothing else of the event unpacked: for
// the passes that search the trace by time.
func (t Trace) TimeAt(i int) int64 {
	p, wide := t.packed(i)
	if wide != nil {
		return wide.TimeUS
	}
	return packedTime(t.arena.base.time, p.lo)
}

// packed is event i as it is kept: packed, or whole in the wide table.
func (t Trace) packed(i int) (*packedEvent, *Event) {
	if uint(i) >= uint(t.n) {
		panic("snapshot: trace index out of range")
	}
	a := t.arena
	p := &a.chunks[(t.off+i)>>eventChunkBits][(t.off+i)&(eventChunkLen-1)]
	if p.wide() {
		return p, &a.wide[p.hi]
	}
	return p, nil
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

// Columns are fields of consecutive events, a slice per field: what
// Trace.Columns fills for the passes over every event that read only a
// few fields, without unpacking the others (Events unpacks all six). A nil
// slice is a field not asked for; Actions is always filled.
type Columns struct {
	Actions []Action
	Addrs   []uint64
	Sizes   []uint64
	Stacks  []StackID
}

// Columns fills the columns of c with events i, i+1, ... up to
// len(c.Actions) (the others at least as long, or nil) or the last event
// (0 <= i <= Len), and returns how many it filled. Each field is read a
// block at a time in a loop of its own. The replay's scan of each
// address's history took 61-63 ms on one core over the 11.4 M events of
// the 996 MB bench file this way, 104-118 ms through a Cursor.
func (t Trace) Columns(c Columns, i int) int {
	if uint(i) > uint(t.n) {
		panic("snapshot: trace index out of range")
	}
	n := min(len(c.Actions), t.n-i)
	a := t.arena
	for got, k := 0, t.off+i; got < n; {
		ps := a.chunks[k>>eventChunkBits][k&(eventChunkLen-1):]
		ps = ps[:min(len(ps), n-got)]
		a.columns(c, got, ps)
		got += len(ps)
		k += len(ps)
	}
	return n
}

// columns fills the columns of c from index at on with the fields of ps,
// in a loop written out for each field. The replay's address scan of the
// 996 MB bench file took 62-66 ms so on one core, against 93-95 ms with
// one generic loop taking a field's two readers as functions (not
// inlined here), and 90-95 ms with one loop over the events that fills
// every column asked (the breakdown's three columns: 44 ms against 59-60).
func (a *eventArena) columns(c Columns, at int, ps []packedEvent) {
	acts := c.Actions[at:][:len(ps)]
	for j := range ps {
		if p := &ps[j]; p.wide() {
			acts[j] = a.wide[p.hi].Action
		} else {
			acts[j] = Action(p.lo >> packActionShift & 3)
		}
	}
	if c.Addrs != nil {
		addrs := c.Addrs[at:][:len(ps)]
		for j := range ps {
			if p := &ps[j]; p.wide() {
				addrs[j] = a.wide[p.hi].Addr
			} else {
				addrs[j] = a.base.addr + p.hi&(1<<packAddrBits-1)<<packAddrUnit
			}
		}
	}
	if c.Sizes != nil {
		sizes := c.Sizes[at:][:len(ps)]
		for j := range ps {
			if p := &ps[j]; p.wide() {
				sizes[j] = a.wide[p.hi].Size
			} else {
				sizes[j] = p.hi>>packAddrBits | p.lo>>packSizeShift<<packSizeLow
			}
		}
	}
	if c.Stacks != nil {
		stacks := c.Stacks[at:][:len(ps)]
		for j := range ps {
			if p := &ps[j]; p.wide() {
				stacks[j] = a.wide[p.hi].Stack
			} else {
				stacks[j] = packedStack(p.lo)
			}
		}
	}
}

// EventsBlock is how many events All and a Cursor unpack at once (16 KiB),
// and the passes over every event that fill a buffer with Events.
const EventsBlock = 512

// Cursor reads the events of a trace a block at a time, for passes that
// read events in order, forwards or backwards, or near one another. Its At
// is inlined: about 5 ns an event in order, as much as Trace.At's call
// since that unpacks in one call instead of two (it cost 20;
// BenchmarkTraceCursor, BenchmarkTraceAt).
type Cursor struct {
	tr    Trace
	first int // of the block in buf
	buf   []Event
	block [EventsBlock]Event
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
	c.first = i &^ (EventsBlock - 1)
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
		var buf [EventsBlock]Event
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
