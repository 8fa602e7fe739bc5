package snapshot

import (
	"bytes"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// Events are kept in 16 bytes; contexts other than the first event's live
// in a column that only chunks holding such an event pay for.
func TestTraceContexts(t *testing.T) {
	if n := unsafe.Sizeof(packedEvent{}); n != 16 {
		t.Errorf("a packed event is %d bytes, want 16", n)
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

// Every event comes back as it was pushed; those whose values do not fit
// the packed layout are kept whole, and only those. The arena's first
// event, an alloc at 0x7f3a_0000_0000 and 3 us, sets its bases, unless the
// time of the case's own is 2**32 us or more: then 3 us into that one's
// epoch. Its address base is 0x7f3a_0000_0000's 1 TiB region,
// 0x7f00_0000_0000, less 2 TiB.
func TestEventPacking(t *testing.T) {
	const base = 0x7d00_0000_0000
	for _, tc := range []struct {
		name string
		e    Event
		wide bool
	}{
		{"alloc", Event{Addr: 0x7f3a_1c00_0000, Size: 20 << 20, TimeUS: 1795272266498364, Stack: 41, Stream: 3, Action: ActionAlloc}, false},
		{"largest narrow: 15 epochs on", Event{Addr: base + 1<<42 - 512, Size: 1<<33 - 1, TimeUS: 15<<32 | 1<<32 - 1, Stack: 1<<20 - 1, Stream: 1<<4 - 1, Action: ActionFreeCompleted}, false},
		{"a size's top bits", Event{Addr: base + 512, Size: 3<<31 | 5, Stack: 1<<20 - 2, Action: ActionAlloc}, false},
		{"the address base", Event{Addr: base, Size: 1, Action: ActionFreeRequested}, false},
		{"time 16 epochs on", Event{Addr: base, Size: 512, TimeUS: 16 << 32, Action: ActionAlloc}, true},
		{"time before the first event's epoch", Event{Addr: base, Size: 512, TimeUS: -1, Action: ActionAlloc}, true},
		{"address below the window", Event{Addr: base - 512, Size: 512, Action: ActionAlloc}, true},
		{"address past the window", Event{Addr: base + 1<<42, Size: 512, Action: ActionAlloc}, true},
		{"address off the 512-byte units", Event{Addr: 0x7f3a_1c00_0100, Size: 512, Action: ActionAlloc}, true},
		{"size of 8 GiB", Event{Addr: base, Size: 1 << 33, Action: ActionAlloc}, true},
		{"stack past 20 bits", Event{Addr: base, Size: 512, Stack: 1 << 20, Action: ActionAlloc}, true},
		{"stream past 4 bits", Event{Addr: base, Size: 512, Stream: 1 << 4, Action: ActionAlloc}, true},
		{"segment event", Event{Addr: base, Size: 2 << 20, Action: ActionSegmentAlloc}, true},
		{"no time, no stack", Event{Action: ActionSnapshot, Stack: NoStack}, true},
		{"unknown action", Event{Addr: base, Action: ActionUnknown}, true},
	} {
		first := Event{Addr: 0x7f3a_0000_0000, Size: 2, TimeUS: 3, Action: ActionAlloc}
		if tc.e.TimeUS >= 1<<32 && !strings.Contains(tc.name, "epoch") {
			first.TimeUS += tc.e.TimeUS &^ (1<<32 - 1)
		}
		var a eventArena
		push(&a, first, Context{})
		push(&a, tc.e, Context{})
		if got := a.at(1); got != tc.e {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.e)
		}
		if wide := len(a.wide) == 1; wide != tc.wide {
			t.Errorf("%s: kept whole %v, want %v", tc.name, wide, tc.wide)
		}
		if a.at(0) != first {
			t.Errorf("%s: the event before changed to %+v", tc.name, a.at(0))
		}
	}
}

// The address base is set by the arena's first block event, whatever the
// events before it (kept whole) hold; an arena whose first block event is
// low in the address space counts from 0.
func TestAddressBase(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first []Event
		block Event
		base  uint64
	}{
		{"a snapshot() first", []Event{{Action: ActionSnapshot}, {Addr: 0x7f3a_0000_0000, Size: 2 << 20, Action: ActionSegmentAlloc}}, Event{Addr: 0x7f3a_0000_0000, Size: 512, Action: ActionAlloc}, 0x7d00_0000_0000},
		{"an OOM first", []Event{{Addr: 1 << 30, Size: 1 << 20, Action: ActionOOM}}, Event{Addr: 0x2_0000_0000, Size: 512, Action: ActionFreeRequested}, 0},
		{"the top of a region", nil, Event{Addr: 0x7fff_ffff_fe00, Size: 512, Action: ActionAlloc}, 0x7d00_0000_0000},
		{"a region's first byte", nil, Event{Addr: 0x7e00_0000_0000, Size: 512, Action: ActionAlloc}, 0x7e00_0000_0000 - 2<<40},
	} {
		var a eventArena
		for _, e := range append(tc.first, tc.block) {
			push(&a, e, Context{})
		}
		if a.base.unbased != 0 || a.base.addr != tc.base {
			t.Errorf("%s: address base %#x (unbased %d), want %#x", tc.name, a.base.addr, a.base.unbased, tc.base)
		}
		if len(a.wide) != len(tc.first) {
			t.Errorf("%s: %d events kept whole, want the %d before the block event", tc.name, len(a.wide), len(tc.first))
		}
		for i, e := range append(tc.first, tc.block) {
			if got := a.at(i); got != e {
				t.Errorf("%s: event %d %+v, want %+v", tc.name, i, got, e)
			}
		}
	}
}

// A tail's arena joins the head's with every event renumbered and in place:
// across chunk boundaries, with events kept whole in either arena, sizes
// whose top bits share the stack's word, an event that renumbering makes
// too wide to pack, and contexts that differ from
// the head's (which take the event-by-event path). Times cross epochs (their
// high 32 bits change) in either arena and at the join, and go back.
func TestAppendArena(t *testing.T) {
	stackOf := func(s StackID) StackID {
		if s >= 11 { // the events' stacks are i%11: any other id was misread
			t.Errorf("renumbered stack %d, which no event has", s)
		}
		if s == 7 {
			return 1 << 22 // no longer packs
		}
		return s + 100
	}
	streams := []StreamID{5, 6}
	for _, tc := range []struct {
		name       string
		head, tail int
		tailCtx    Context
		procs      int // GOMAXPROCS: the tail is renumbered a range of chunks per core
	}{
		{"head ends mid-chunk", eventChunkLen + 3, 2*eventChunkLen + 5, Context{}, 1},
		{"head ends on a chunk boundary", eventChunkLen, eventChunkLen + 1, Context{}, 4},
		{"tail fits the head's last chunk", 10, 20, Context{}, 4},
		{"other contexts", 10, eventChunkLen + 2, Context{CompileContext: 9}, 4},
		{"many chunks, renumbered a range per core", eventChunkLen/2 + 1, 9*eventChunkLen + 7, Context{}, 4},
		{"many chunks, the last emptied", 5, 7*eventChunkLen + 5, Context{}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			event := func(i int) Event {
				e := Event{Addr: uint64(i) * 512, Size: 512, TimeUS: int64(i/40000)<<32 | int64(i), Stack: StackID(i % 11), Stream: StreamID(i % 2), Action: ActionAlloc}
				if i%5003 == 5 {
					e.TimeUS = -int64(i) // an epoch of one event
				}
				if i%1000 == 1 {
					e.Size = 1 << 41 // kept whole
				}
				if i%1000 == 7 {
					e.Size = 5 << 30 // packed, its top bits beside the stack's
				}
				if i%997 == 3 {
					e.Action = ActionSegmentAlloc // one of Others
				}
				return e
			}
			var head, tail eventArena
			for i := range tc.head {
				push(&head, event(i), Context{})
			}
			for i := range tc.tail {
				push(&tail, event(tc.head+i), tc.tailCtx)
			}
			tail.renumber(stackOf, streams)
			head.appendArena(&tail, func(c Context) Context { return c })
			if head.n != tc.head+tc.tail || tail.n != 0 {
				t.Fatalf("arena holds %d events (tail %d), want %d", head.n, tail.n, tc.head+tc.tail)
			}
			for i := range head.n {
				want := event(i)
				if i >= tc.head {
					want.Stack, want.Stream = stackOf(want.Stack), streams[want.Stream]
				}
				if got := head.at(i); got != want {
					t.Fatalf("event %d: %+v, want %+v", i, got, want)
				}
				if c := head.context(i); i >= tc.head && c != tc.tailCtx || i < tc.head && c != (Context{}) {
					t.Fatalf("event %d: context %+v", i, c)
				}
			}
			checkOthers(t, &head)
		})
	}
}

// checkOthers checks that a lists as its Others exactly its events i with
// i%997 == 3, those the tests above make segment events.
func checkOthers(t *testing.T, a *eventArena) {
	t.Helper()
	var others []int
	for i := range a.n {
		if i%997 == 3 {
			others = append(others, i)
		}
	}
	if !slices.Equal(a.others, others) {
		t.Errorf("others %v, want %v", a.others, others)
	}
}

// TestCutAhead cuts a tail's events for the head's length before the
// head holds them all, as a merge does while the tails before it are
// appended (split.go), then appends them: every event lands where it
// would have, for heads that end mid-chunk, on a chunk boundary and inside
// their first chunk, and tails that fit the room left and that span many
// chunks.
func TestCutAhead(t *testing.T) {
	event := func(i int) Event {
		e := Event{Addr: uint64(i) * 512, Size: 512, TimeUS: int64(i), Stack: StackID(i % 11), Action: ActionAlloc}
		if i%997 == 3 {
			e.Action = ActionSegmentAlloc // one of Others
		}
		return e
	}
	for _, tc := range []struct {
		name       string
		head, tail int
	}{
		{"head ends mid-chunk", eventChunkLen + 3, 2*eventChunkLen + 5},
		{"head ends on a chunk boundary", eventChunkLen, eventChunkLen + 1},
		{"tail fits the head's last chunk", 10, 20},
		{"tail fills the head's last chunk exactly", eventChunkLen - 7, 7},
		{"many chunks", eventChunkLen/2 + 1, 5*eventChunkLen + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var head, tail eventArena
			for i := range tc.head {
				push(&head, event(i), Context{})
			}
			for i := range tc.tail {
				push(&tail, event(tc.head+i), Context{})
			}
			cut := tail.cutFor(tc.head)
			if tail.n != 0 {
				t.Fatalf("the tail holds %d events after its cut", tail.n)
			}
			head.appendCut(cut)
			if head.n != tc.head+tc.tail {
				t.Fatalf("arena holds %d events, want %d", head.n, tc.head+tc.tail)
			}
			for i := range head.n {
				if got := head.at(i); got != event(i) {
					t.Fatalf("event %d: %+v, want %+v", i, got, event(i))
				}
			}
			for k, c := range head.chunks[:len(head.chunks)-1] {
				if len(c) != eventChunkLen {
					t.Fatalf("chunk %d holds %d events, want %d", k, len(c), eventChunkLen)
				}
			}
			checkOthers(t, &head)
		})
	}
}

// Others finds in each device's trace exactly the events a pass over all
// of them finds, on every format fixture.
func TestTraceOthers(t *testing.T) {
	paths, _ := filepath.Glob("testdata/format/*.pickle")
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	found := 0
	for _, path := range paths {
		sn, err := Read(bytes.NewReader(readRaw(t, path)))
		if err != nil {
			t.Fatal(err)
		}
		for d, tr := range sn.Traces {
			var want, got []int
			for i, e := range tr.All() {
				if !isBlockEvent(e.Action) {
					want = append(want, i)
				}
			}
			for i, e := range tr.Others() {
				if e != tr.At(i) {
					t.Fatalf("%s device %d: event %d is %+v, At says %+v", path, d, i, e, tr.At(i))
				}
				got = append(got, i)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s device %d: Others gave %v, want %v", path, d, got, want)
			}
			found += len(got)
		}
	}
	if found == 0 {
		t.Error("no fixture has a segment event, snapshot() or OOM")
	}

	// Two devices' traces share one arena: each finds its own, numbered
	// from its start.
	var a eventArena
	for i := range 10 {
		e := Event{Addr: uint64(i), Action: ActionAlloc}
		if i == 2 || i == 5 || i == 7 {
			e.Action = ActionSegmentAlloc
		}
		push(&a, e, Context{})
	}
	for _, tc := range []struct {
		tr   Trace
		want []int
	}{
		{Trace{arena: &a, off: 0, n: 4}, []int{2}},
		{Trace{arena: &a, off: 4, n: 6}, []int{1, 3}},
		{Trace{arena: &a, off: 3, n: 2}, nil},
		{Trace{}, nil},
	} {
		var got []int
		for i := range tc.tr.Others() {
			got = append(got, i)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("trace at %d of %d events: Others gave %v, want %v", tc.tr.off, tc.tr.n, got, tc.want)
		}
	}
}

// A tail whose first event is epochs after the head's, or whose first
// block event is in another region of addresses, keeps its values when it
// joins: its events are packed again from the head's bases, and those
// that then do not fit (16 or more epochs after the head's, or outside
// the head's window of addresses) are kept whole. A head with no block
// event yet takes the tail's address base.
func TestAppendArenaRebases(t *testing.T) {
	const region = 0x7f00_0000_0000 // its window: 0x7d00_0000_0000 up to 0x8100_0000_0000
	epochs := func(i int) Event {
		return Event{Addr: region + uint64(i)*512, Size: 512, TimeUS: int64(i)<<32 | 7, Action: ActionAlloc}
	}
	regions := func(i int) Event { // the tail's first in the next region, its last two at the end of the head's window
		return Event{Addr: region + uint64(i)<<40, Size: 512, TimeUS: int64(i), Action: ActionFreeRequested}
	}
	snapshotFirst := func(i int) Event {
		if i == 0 {
			return Event{Action: ActionSnapshot}
		}
		return Event{Addr: region + 1<<40 + uint64(i)*512, Size: 512, TimeUS: int64(i), Action: ActionAlloc}
	}
	for _, tc := range []struct {
		name       string
		event      func(int) Event
		head, tail []int
		wide       int
	}{
		{"epochs", epochs, []int{0, 1, 2}, []int{14, 15, 16, 17}, 2},
		{"address regions", regions, []int{0}, []int{1, 2, 2}, 2},
		{"a head with no block event", snapshotFirst, []int{0}, []int{1, 2}, 1},
	} {
		var head, tail eventArena
		for _, i := range tc.head {
			push(&head, tc.event(i), Context{})
		}
		for _, i := range tc.tail {
			push(&tail, tc.event(i), Context{})
		}
		if len(tail.wide) != 0 || tail.base == head.base {
			t.Fatalf("%s: the tail keeps %d events whole before it joins and has the head's bases (%v), want none and other bases", tc.name, len(tail.wide), tail.base == head.base)
		}
		head.appendArena(&tail, func(c Context) Context { return c })
		for k, i := range append(tc.head, tc.tail...) {
			if got := head.at(k); got != tc.event(i) {
				t.Errorf("%s: event %d: %+v, want %+v", tc.name, k, got, tc.event(i))
			}
		}
		if len(head.wide) != tc.wide {
			t.Errorf("%s: %d events kept whole, want %d", tc.name, len(head.wide), tc.wide)
		}
	}
}

// Events reads what At reads, block by block: from any start, across
// chunk boundaries, in a trace that starts inside its arena, with events
// kept whole among the packed ones.
func TestTraceEvents(t *testing.T) {
	var all []Event
	for i := range 2*eventChunkLen + 100 {
		e := Event{Addr: uint64(i) << 9, Size: 512 * uint64(1+i%11), TimeUS: 1795272266498364 + int64(i)<<20 + int64(i%3), Stack: StackID(i % 7),
			Action: []Action{ActionAlloc, ActionFreeRequested, ActionFreeCompleted}[i%3]}
		switch {
		case i%5000 == 3:
			e.Size = 1 << 41 // kept whole
		case i%7001 == 5:
			e.Action = ActionSegmentAlloc // kept whole
		case i%13 == 0:
			e.Size = 3 << 31 // packed, the size's top bits in the low word
		}
		all = append(all, e)
	}
	tr := NewTrace(all, nil)
	if len(tr.arena.wide) == 0 {
		t.Fatal("no event kept whole: the test misses that path")
	}
	sub := Trace{arena: tr.arena, off: 1000, n: tr.n - 1100}
	for _, c := range []struct {
		tr        Trace
		from, buf int
	}{
		{tr, 0, EventsBlock}, {tr, eventChunkLen - 7, 100}, {tr, 3, 2*eventChunkLen + 500},
		{tr, tr.n - 10, 64}, {tr, tr.n, 8}, {sub, 0, eventChunkLen}, {sub, sub.n - 1, 4},
	} {
		got := c.tr.Events(make([]Event, c.buf), c.from)
		want := min(c.buf, c.tr.n-c.from)
		if len(got) != want {
			t.Errorf("Events(%d, from %d): %d events, want %d", c.buf, c.from, len(got), want)
		}
		for j, e := range got {
			if at := c.tr.At(c.from + j); e != at {
				t.Fatalf("Events(%d, from %d)[%d] = %+v, At says %+v", c.buf, c.from, j, e, at)
			}
		}
		// Columns, every field and two of them, agree with At too.
		full := Columns{Actions: make([]Action, c.buf), Addrs: make([]uint64, c.buf), Sizes: make([]uint64, c.buf), Stacks: make([]StackID, c.buf)}
		two := Columns{Actions: make([]Action, c.buf), Stacks: make([]StackID, c.buf)}
		for _, cols := range []Columns{full, two} {
			if n := c.tr.Columns(cols, c.from); n != want {
				t.Errorf("Columns(%d, from %d): %d events, want %d", c.buf, c.from, n, want)
			}
			for j := range want {
				at := c.tr.At(c.from + j)
				if cols.Actions[j] != at.Action || cols.Stacks[j] != at.Stack ||
					cols.Addrs != nil && (cols.Addrs[j] != at.Addr || cols.Sizes[j] != at.Size) {
					t.Fatalf("Columns(%d, from %d)[%d] = %v %v %v %v, At says %+v", c.buf, c.from, j,
						cols.Actions[j], cols.Stacks[j], cols.Addrs != nil && cols.Addrs[j] == at.Addr, cols.Sizes != nil && cols.Sizes[j] == at.Size, at)
				}
			}
		}
	}
	for _, tr := range []Trace{tr, sub} {
		c := tr.Cursor()
		for _, i := range []int{0, 1, EventsBlock, EventsBlock - 1, tr.n - 1, eventChunkLen, 7, eventChunkLen - 1, tr.n - 2, 7} {
			if got, want := c.At(i), tr.At(i); got != want {
				t.Errorf("Cursor.At(%d) = %+v, At says %+v", i, got, want)
			}
		}
		for i := tr.n - 1; i >= 0; i -= 997 {
			if got, want := c.At(i), tr.At(i); got != want {
				t.Fatalf("backwards: Cursor.At(%d) = %+v, At says %+v", i, got, want)
			}
		}
	}
	for _, tr := range []Trace{tr, sub} {
		for i := range tr.n {
			if e := tr.At(i); tr.StackAt(i) != e.Stack || tr.TimeAt(i) != e.TimeUS {
				t.Fatalf("event %d of %d from %d: StackAt %d, TimeAt %d; At says %d, %d",
					i, tr.n, tr.off, tr.StackAt(i), tr.TimeAt(i), e.Stack, e.TimeUS)
			}
		}
	}
	n := 0
	for i, e := range sub.All() {
		if i != n || e != all[1000+i] {
			t.Fatalf("All: event %d (%d) = %+v, want %+v", i, n, e, all[1000+i])
		}
		n++
	}
	if n != sub.n {
		t.Errorf("All yielded %d events, want %d", n, sub.n)
	}
}

// BenchmarkTraceAt, BenchmarkTraceEvents and BenchmarkTraceCursor read 1 M
// events in order: one by one, a block at a time, and through a Cursor
// (ns/op is per event).
func BenchmarkTraceAt(b *testing.B) {
	tr := benchTrace()
	var sum uint64
	for i := range b.N {
		sum += tr.At(i % tr.n).Size
	}
	_ = sum
}

func BenchmarkTraceEvents(b *testing.B) {
	tr := benchTrace()
	var buf [EventsBlock]Event
	var sum uint64
	for i := 0; i < b.N; {
		evs := tr.Events(buf[:min(EventsBlock, b.N-i)], i%tr.n)
		for _, e := range evs {
			sum += e.Size
		}
		i += len(evs)
	}
	_ = sum
}

func BenchmarkTraceCursor(b *testing.B) {
	tr := benchTrace()
	c := tr.Cursor()
	var sum uint64
	for i := range b.N {
		sum += c.At(i % tr.n).Size
	}
	_ = sum
}

func benchTrace() Trace {
	events := make([]Event, 1<<20)
	for i := range events {
		events[i] = Event{Addr: uint64(i) << 9, Size: 512, TimeUS: 1795272266498364 + int64(i), Action: ActionAlloc}
	}
	return NewTrace(events, nil)
}

// BenchmarkPush packs events into a fresh arena as the decoder does, a
// trace entry at a time (ns/op is per event).
func BenchmarkPush(b *testing.B) {
	var a eventArena
	for i := range b.N {
		push(&a, Event{Action: ActionAlloc, Addr: 140510184341504 + uint64(i)<<9, Size: 2097152,
			TimeUS: 1795272357742730 + int64(i), Stack: StackID(i & 1023)}, Context{})
	}
	if a.n != b.N || a.at(b.N-1).Addr != 140510184341504+uint64(b.N-1)<<9 {
		b.Fatalf("pushed %d events, the last at %#x", a.n, a.at(b.N-1).Addr)
	}
}

// push pushes e into a, as the decoder pushes an event it built.
func push(a *eventArena, e Event, c Context) int { return a.push(&e, c) }
