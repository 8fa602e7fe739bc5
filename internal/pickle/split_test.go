package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"testing"
)

// batchedList is what CPython's pickler writes (protocol 4) for a list of
// n ints: MARK, up to 1,000 items, APPENDS, and so on. It returns the
// pickle and the offsets of the batches' MARKs.
func batchedList(n int) ([]byte, []int64) {
	b := []byte{opProto, 4, opEmptyList, opMemoize}
	var marks []int64
	for i := 0; i < n; i += 1000 {
		marks = append(marks, int64(len(b)))
		b = append(b, opMark)
		for j := i; j < min(n, i+1000); j++ {
			b = append(b, opBinInt2, byte(j), byte(j>>8))
		}
		b = append(b, opAppends)
	}
	return append(b, opStop), marks
}

func TestDecodeTo(t *testing.T) {
	raw, marks := batchedList(2500)
	want, err := decodeTree(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off     int64
		reached bool
	}{
		{marks[1], true},      // an opcode boundary
		{marks[1] + 2, false}, // inside BININT2's argument: stops at the next opcode
		{0, true},
	} {
		s := newTreeSink()
		d := NewDecoder(bytes.NewReader(raw), s, DefaultLimits)
		reached, err := d.DecodeTo(tc.off)
		if err != nil || reached != tc.reached || d.Offset() < tc.off {
			t.Errorf("DecodeTo(%d) = %v, %v at %d; want %v", tc.off, reached, err, d.Offset(), tc.reached)
		}
		v, err := d.Decode()
		if err != nil || !reflect.DeepEqual(s.plain(v), want) {
			t.Errorf("after DecodeTo(%d), Decode gave %v, %v", tc.off, err, v)
		}
	}
}

// forkAt walks raw from its start to the first batch at or after off and
// returns the tail that starts there, building with s.
func forkAt(t *testing.T, raw []byte, off int64, s Sink) *Decoder {
	t.Helper()
	w := NewDecoder(bytes.NewReader(raw), newTreeSink(), DefaultLimits)
	start, err := w.Walk(off)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(bytes.NewReader(raw[start:]), s, DefaultLimits)
	if err := w.Fork(d, start, w.Memoized(), nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// A tail starts at the first batch at or after its offset, decodes the
// batches into a list of its own and ends where the list does.
func TestTail(t *testing.T) {
	raw, marks := batchedList(2500)
	s := newTreeSink()
	d := forkAt(t, raw, marks[0]+1, s)
	if d.TailStart() != marks[1] {
		t.Fatalf("tail starts at %d, want the second batch at %d", d.TailStart(), marks[1])
	}
	h, end, err := d.DecodeTail(nil)
	if err != nil {
		t.Fatal(err)
	}
	if end != int64(len(raw)-1) {
		t.Errorf("tail ends at %d, want the STOP at %d", end, len(raw)-1)
	}
	items := s.open[h].items
	first, last := map[string]any{"int": "1000"}, map[string]any{"int": "2499"}
	if len(items) != 1500 || !reflect.DeepEqual(items[0], first) || !reflect.DeepEqual(items[1499], last) {
		t.Errorf("tail got %d items (%v ... %v), want 1000 ... 2499", len(items), items[0], items[len(items)-1])
	}

	for name, raw := range map[string][]byte{
		"after the last batch": raw,
		"protocol 0":           []byte("(lp0\nI1\naI2\na."),
	} {
		from := marks[2] + 1
		if name == "protocol 0" {
			from = 0
		}
		if _, err := NewDecoder(bytes.NewReader(raw), newTreeSink(), DefaultLimits).Walk(from); !errors.Is(err, ErrNoSplit) {
			t.Errorf("%s: Walk gave %v, want ErrNoSplit", name, err)
		}
	}
}

// One walk starts several tails: each at the first batch at or after its
// offset and after the last tail's, each ending where ends says, the next
// one's start; their memos share the walk's, which neither may change.
func TestWalkForks(t *testing.T) {
	raw, marks := batchedList(5000)
	walker := NewDecoder(bytes.NewReader(raw), newTreeSink(), DefaultLimits)
	var starts []int64
	var tails []*Decoder
	var sinks []*treeSink
	for _, from := range []int64{marks[1], marks[1], marks[3]} {
		start, err := walker.Walk(from)
		if err != nil {
			t.Fatal(err)
		}
		s := newTreeSink()
		starts, sinks = append(starts, start), append(sinks, s)
		d := NewDecoder(bytes.NewReader(raw[start:]), s, DefaultLimits)
		if err := walker.Fork(d, start, walker.Memoized(), nil); err != nil {
			t.Fatal(err)
		}
		tails = append(tails, d)
	}
	if want := []int64{marks[1], marks[2], marks[3]}; !reflect.DeepEqual(starts, want) {
		t.Fatalf("the walk stopped at %v, want %v (never twice at one batch)", starts, want)
	}
	if next, err := walker.Walk(0); next != marks[4] || err != nil {
		t.Errorf("the walk went on to %d (%v), want the last batch at %d", next, err, marks[4])
	}
	if _, err := walker.Walk(0); !errors.Is(err, ErrNoSplit) {
		t.Errorf("walking past the last batch: %v, want ErrNoSplit", err)
	}
	for k, d := range tails {
		var ends func(int64) bool
		if k+1 < len(starts) {
			ends = func(off int64) bool { return off == starts[k+1] }
		}
		h, end, err := d.DecodeTail(ends)
		if err != nil {
			t.Fatalf("tail %d: %v", k, err)
		}
		items := sinks[k].open[h].items
		want := 2000
		if k < 2 {
			want = 1000
		}
		if len(items) != want || !reflect.DeepEqual(items[0], map[string]any{"int": fmt.Sprint(1000 * (k + 1))}) {
			t.Errorf("tail %d: %d items from %v, want %d from %d", k, len(items), items[0], want, 1000*(k+1))
		}
		if k+1 < len(starts) && end != starts[k+1] {
			t.Errorf("tail %d ends at %d, want the next one's start %d", k, end, starts[k+1])
		}
		if err := d.memo.put(0, Value{Kind: KindNone}); !errors.Is(err, errSharedMemo) {
			t.Errorf("tail %d stored into the shared memo: %v", k, err)
		}
	}
}

// splicedAt decodes the tail of b from the batch at mark into a sink of its
// own and the head, into head, up to there, then splices the tail into the
// head, its strings mapped into head's. It returns the head, to go on, and
// how many of the tail's memo entries have been mapped.
func splicedAt(t *testing.T, b []byte, mark int64, head *treeSink) (*Decoder, *int) {
	t.Helper()
	tail := newTreeSink()
	td := forkAt(t, b, mark, tail)
	_, end, err := td.DecodeTail(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(bytes.NewReader(b), head, DefaultLimits)
	if at, err := d.DecodeTo(td.TailStart()); !at || err != nil {
		t.Fatalf("head stopped at %d (%v), want the tail's start %d", d.Offset(), err, td.TailStart())
	}
	mapped := new(int)
	tr := func(v Value) Value {
		*mapped++
		if v.Kind == KindString {
			v, _ = head.String([]byte(tail.strs[v.N]), false)
		}
		return v
	}
	if err := d.Splice(td, tr, bytes.NewReader(b[end:])); err != nil {
		t.Fatal(err)
	}
	return d, mapped
}

// stringList is what CPython's pickler writes (protocol 4, no frames) for
// the start of a list of n distinct strings s0, s1, ..., in batches of
// 1,000: the list is memo id 0, item j id j+1. It returns the pickle,
// which goes on after the list, and the offsets of the batches' MARKs.
func stringList(n int) ([]byte, []int64) {
	b := []byte{opProto, 4, opEmptyList, opMemoize}
	var marks []int64
	for i := 0; i < n; i += 1000 {
		marks = append(marks, int64(len(b)))
		b = append(b, opMark)
		for j := i; j < min(n, i+1000); j++ {
			s := fmt.Sprintf("s%d", j)
			b = append(append(append(b, opShortBinUnicode, byte(len(s))), s...), opMemoize)
		}
		b = append(b, opAppends)
	}
	return b, marks
}

// After a splice the head reads the tail's memo entries mapped into its
// own values, lazily, and a store into their range first maps them all.
func TestSpliceMemo(t *testing.T) {
	b, marks := stringList(3000)
	get := func(item int) []byte { return binary.LittleEndian.AppendUint32([]byte{opLongBinGet}, uint32(item+1)) }
	b = append(b, get(1500)...) // not a MARK: the tail ends at the list's end
	b = append(b, opMark)
	b = append(b, get(10)...)
	b = append(b, get(2999)...)
	b = append(b, opShortBinUnicode, 3, 'n', 'e', 'w')
	b = append(binary.LittleEndian.AppendUint32(append(b, opLongBinPut), 2000+1), opPop)
	b = append(b, get(2000)...)
	b = append(b, get(2100)...)
	b = append(b, opTuple, opTuple3, opStop)

	head := newTreeSink()
	d, mapped := splicedAt(t, b, marks[1], head)
	if *mapped != 0 {
		t.Errorf("the splice mapped %d entries, want none before they are read", *mapped)
	}
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) any { return map[string]any{"str": s} }
	got := head.plain(v).(map[string]any)["tuple"].([]any)[1:]
	want := []any{str("s1500"), map[string]any{"tuple": []any{str("s10"), str("s2999"), str("new"), str("s2100")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the list: %v, want %v", got, want)
	}
	// s1500 and s2999 read lazily, then all 2000 of the tail's entries
	// (ids 1001..3000) mapped for the store.
	if *mapped != 2+2000 {
		t.Errorf("%d entries mapped, want 2 reads and the 2000 entries of the tail", *mapped)
	}
}

// After a splice the head goes on storing and reading its memo in fast():
// its new entries after the tail's, and its own before them, are read as
// they are; only the tail's are mapped.
func TestMemoAfterSplice(t *testing.T) {
	b, marks := stringList(2000)
	get := func(id int) []byte { return binary.LittleEndian.AppendUint32([]byte{opLongBinGet}, uint32(id)) }
	b = append(b, get(11)...) // the head's own, s10; not a MARK: the tail ends at the list's end
	b = append(b, opMark)
	for k := range 40 { // ids 2001..2040, stored and read back in fast()
		s := fmt.Sprintf("new%d", k)
		b = append(append(append(b, opShortBinUnicode, byte(len(s))), s...), opMemoize, opPop)
	}
	b = append(b, get(2001+5)...)
	b = append(b, get(1501)...) // the tail's: s1500
	b = append(b, get(2001+39)...)
	for range 8 { // fast() leaves the last 16 bytes to step
		b = append(b, opNone, opPop)
	}
	b = append(b, opTuple, opTuple3, opStop)

	head := newTreeSink()
	d, mapped := splicedAt(t, b, marks[1], head)
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) any { return map[string]any{"str": s} }
	got := head.plain(v).(map[string]any)["tuple"].([]any)[1:]
	want := []any{str("s10"), map[string]any{"tuple": []any{str("new5"), str("s1500"), str("new39")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the list: %v, want %v", got, want)
	}
	if *mapped != 1 {
		t.Errorf("%d entries mapped, want the one read of the tail's", *mapped)
	}
	if d.Memoized() != 2041 {
		t.Errorf("memo holds %d entries, want 2041", d.Memoized())
	}
}

// framedList is what CPython's pickler writes (protocol 4) for a list of n
// short strings, each memoized, two of every three an equal "N/A" written
// anew (as torch writes one in every trace entry), the others distinct:
// batches of 1,000, in frames of about frameLen bytes (framed). It returns
// the pickle and its frames' offsets.
func framedList(n, frameLen int) ([]byte, []int64) {
	return framedItems(n, frameLen, func(j int) []byte {
		s := fmt.Sprintf("s%d", j)
		if j%3 != 2 {
			s = "N/A"
		}
		return append([]byte{opShortBinUnicode, byte(len(s))}, s...)
	})
}

// framedItems is the pickle of a list of n items, item(j) the opcodes of
// the j-th, each memoized but memo reads: batches of 1,000, in frames
// (framed).
func framedItems(n, frameLen int, item func(j int) []byte) ([]byte, []int64) {
	ops := [][]byte{{opEmptyList}, {opMemoize}}
	for i := 0; i < n; i += 1000 {
		ops = append(ops, []byte{opMark})
		for j := i; j < min(n, i+1000); j++ {
			op := item(j)
			ops = append(ops, op)
			if op[0] != opBinGet && op[0] != opLongBinGet {
				ops = append(ops, []byte{opMemoize})
			}
		}
		ops = append(ops, []byte{opAppends})
	}
	return framed(append(ops, []byte{opStop}), frameLen)
}

// framed frames ops, in frames of about frameLen bytes, each starting
// between two objects (never at a MEMOIZE, which the pickler writes with
// its object). It returns the pickle and its frames' offsets.
func framed(ops [][]byte, frameLen int) ([]byte, []int64) {
	b := []byte{opProto, 4}
	var frames []int64
	var frame []byte
	flush := func() {
		frames = append(frames, int64(len(b)))
		b = binary.LittleEndian.AppendUint64(append(b, opFrame), uint64(len(frame)))
		b, frame = append(b, frame...), nil
	}
	for _, op := range ops {
		if len(frame) >= frameLen && op[0] != opMemoize {
			flush()
		}
		frame = append(frame, op...)
	}
	flush()
	return b, frames
}

// FramesNear finds, near each offset, the frame a hop from the stream's
// start would: the next frame's start, the offset itself where a frame
// starts there, and none past the last frame's start or in a stream
// without frames. FRAME bytes whose lengths lead nowhere are passed over,
// with a read each at most frameProbes times.
func TestFramesNear(t *testing.T) {
	raw, frames := framedList(5000, 1024)
	size := int64(len(raw))
	last := frames[len(frames)-1]
	for _, tc := range []struct {
		at, want int64
	}{
		{0, frames[0]},
		{frames[0] + 1, frames[1]},
		{frames[7], frames[7]},
		{frames[7] - 1, frames[7]},
		{last, last},
		{last + 1, -1},
		{size + 5, -1},
	} {
		proto, starts, err := FramesNear(bytes.NewReader(raw), size, []int64{tc.at})
		if err != nil || proto != 4 || len(starts) != 1 || starts[0] != tc.want {
			t.Errorf("FramesNear(%d) = %d, %v, %v; want 4, [%d]", tc.at, proto, starts, err, tc.want)
		}
	}
	if _, starts, err := FramesNear(bytes.NewReader([]byte{opProto, 2, opEmptyList, opStop}), 4, []int64{2}); starts != nil || err != nil {
		t.Errorf("protocol 2: %v, %v; want no starts", starts, err)
	}

	// A window of FRAME opcodes whose lengths point past it at bytes that
	// are no FRAME: each is read once, up to frameProbes.
	hostile := append([]byte{opProto, 4}, bytes.Repeat(binary.LittleEndian.AppendUint64([]byte{opFrame}, maxFrameLen), frameWindow/9+1)...)
	hostile = append(hostile, make([]byte, 2*maxFrameLen)...)
	r := &countingReaderAt{r: bytes.NewReader(hostile)}
	if _, starts, err := FramesNear(r, int64(len(hostile)), []int64{2}); err != nil || starts[0] != -1 {
		t.Errorf("hostile window: %v, %v; want [-1]", starts, err)
	}
	if r.reads > 1+1+frameProbes {
		t.Errorf("hostile window: %d reads, want at most %d", r.reads, 2+frameProbes)
	}
}

// countingReaderAt counts the reads through it.
type countingReaderAt struct {
	r     io.ReaderAt
	reads int
}

func (c *countingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(b, off)
}

// Stretches walked by counting (Counting) hold the entries a walk from
// the start finds there, and each mark the count at its frame; an entry
// walked again from its mark's frame (Reread) is the walk's entry; and a
// tail forked from the first stretch's walk, reading the counted
// stretches' entries so, decodes what a tail forked from a walk from the
// start decodes. The list's later items are memo reads of earlier ones,
// the counted stretches' among them.
func TestCountedStretches(t *testing.T) {
	ids := map[int]uint64{} // item j's memo id, for the items that are not reads
	next := uint64(1)
	raw, frames := framedItems(6000, 1024, func(j int) []byte {
		if j%4 == 3 && j > 1000 {
			if id, ok := ids[j-1-(j*7919)%(j-1)]; ok {
				return binary.LittleEndian.AppendUint32([]byte{opLongBinGet}, uint32(id))
			}
		}
		ids[j], next = next, next+1
		if j%3 == 0 {
			return []byte{opEmptyList} // a container: a placeholder
		}
		s := fmt.Sprintf("s%d", j%500)
		return append([]byte{opShortBinUnicode, byte(len(s))}, s...)
	})
	size := int64(len(raw))
	proto, starts, err := FramesNear(bytes.NewReader(raw), size, []int64{frames[3], size * 2 / 5, size * 7 / 10})
	if err != nil || proto != 4 || slices.Contains(starts, -1) {
		t.Fatalf("FramesNear = %d, %v, %v", proto, starts, err)
	}
	memoizedAt := func(off int64) (*Decoder, *internSink) {
		s := &internSink{ids: map[string]uint64{}}
		d := NewDecoder(bytes.NewReader(raw[:off]), s, DefaultLimits)
		if _, err := d.Walk(math.MaxInt64); !errors.Is(err, ErrNoSplit) || !d.AtEnd() {
			t.Fatalf("walking to %d: %v", off, err)
		}
		return d, s
	}
	whole, wholeStrs := memoizedAt(size)
	first, firstStrs := memoizedAt(starts[0])

	var counted []Counted
	var batches []int64 // each counted stretch's first batch
	var atBatch []uint64
	bounds := append(slices.Clone(starts), size)
	n := first.Memoized()
	for k := range len(bounds) - 1 {
		from, to := bounds[k], bounds[k+1]
		d := NewDecoder(bytes.NewReader(raw[from:to]), nopSink{}, DefaultLimits)
		d.Stretch(from, proto)
		d.Counting()
		batch, err := d.Walk(from)
		if err != nil {
			t.Fatalf("stretch %d: no batch: %v", k, err)
		}
		batches, atBatch = append(batches, batch), append(atBatch, n+d.Memoized())
		if _, err := d.Walk(math.MaxInt64); !d.AtEnd() {
			t.Fatalf("stretch %d: counted to %d of %d: %v", k, d.Offset(), to, err)
		}
		c := Counted{First: n, Marks: d.Marks()}
		if c.Marks[0].Off != from || c.Marks[len(c.Marks)-1].Off != to || len(c.Marks) < 3 {
			t.Fatalf("stretch %d: marks %v, want its frames from %d to %d", k, c.Marks, from, to)
		}
		for _, m := range c.Marks[1 : len(c.Marks)-1] {
			if w, _ := memoizedAt(m.Off); w.Memoized() != n+m.N {
				t.Fatalf("stretch %d: mark %v, a walk to there memoized %d", k, m, w.Memoized())
			}
		}
		counted = append(counted, c)
		n += d.Memoized()
	}
	if n != whole.Memoized() {
		t.Fatalf("the stretches hold %d entries, the whole walk %d", n, whole.Memoized())
	}

	// Every counted entry, read again, is the whole walk's.
	reread := func(s *internSink) func(from, to int64) *Decoder {
		return func(from, to int64) *Decoder {
			d := NewDecoder(bytes.NewReader(raw[from:to]), s, DefaultLimits)
			d.Stretch(from, proto)
			return d
		}
	}
	read := func(s *internSink) func(id uint64) (Value, bool) {
		return func(id uint64) (Value, bool) {
			for _, c := range counted {
				if id-c.First < c.Marks[len(c.Marks)-1].N {
					return c.Reread(id, reread(s))
				}
			}
			return Value{}, false
		}
	}
	rs := &internSink{ids: map[string]uint64{}}
	for id := first.Memoized(); id < n; id++ {
		g, ok := read(rs)(id)
		w, _ := whole.MemoValue(id)
		if !ok || g.Kind != w.Kind || g.Kind == KindString && rs.strings[g.N] != wholeStrs.strings[w.N] || g.Kind != KindString && g.N != w.N {
			t.Fatalf("memo id %d read again: %v, %v; the walk's %v", id, g, ok, w)
		}
	}

	// The tail of the last stretch decodes as from a walk from the start.
	lazyReads := 0
	items := func(w *Decoder, strs []string, n uint64, read func(*internSink) func(uint64) (Value, bool)) []string {
		s := newTreeSink()
		s.strs = append(s.strs, strs...)
		d := NewDecoder(bytes.NewReader(raw[batches[2]:]), s, DefaultLimits)
		var r func(uint64) (Value, bool)
		if read != nil {
			is := &internSink{ids: map[string]uint64{}}
			rr := read(is)
			r = func(id uint64) (Value, bool) {
				lazyReads++
				v, ok := rr(id)
				if v.Kind == KindString {
					v, _ = s.String([]byte(is.strings[v.N]), false)
				}
				return v, ok
			}
		}
		if err := w.Fork(d, batches[2], n, r); err != nil {
			t.Fatal(err)
		}
		h, _, err := d.DecodeTail(nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range s.open[h].items {
			out = append(out, fmt.Sprint(it))
		}
		return out
	}
	head, headStrs := memoizedAt(batches[2])
	if head.Memoized() != atBatch[2] {
		t.Fatalf("at the last stretch's batch: %d entries counted, %d walked from the start", atBatch[2], head.Memoized())
	}
	got := items(first, firstStrs.strings, atBatch[2], read)
	want := items(head, headStrs.strings, head.Memoized(), nil)
	if len(got) < 1000 || !reflect.DeepEqual(got, want) {
		t.Errorf("tail from the counted stretches: %d items, from a walk: %d", len(got), len(want))
	}
	if lazyReads < 100 {
		t.Errorf("the tail read %d entries of the counted stretches, want its memo reads of them", lazyReads)
	}
}

// sameMemo fails the test unless got's memo holds want's entries: the
// same values, strings by their text (gotStrs and wantStrs).
func sameMemo(t *testing.T, what string, got *Decoder, gotStrs []string, want *Decoder, wantStrs []string) {
	t.Helper()
	for id := range want.Memoized() {
		w, _ := want.MemoValue(id)
		g, _ := got.MemoValue(id)
		if g.Kind != w.Kind || g.Kind == KindString && gotStrs[g.N] != wantStrs[w.N] || g.Kind != KindString && g.N != w.N {
			t.Fatalf("memo id %d: %s %v, walk %v", id, what, g, w)
		}
	}
}

// Where the head stands, its memo is what a walk of the stream up to there
// stores (Prefix): the same entries, the same strings, the open list a
// placeholder of its id, which stays one when the head goes on and closes
// the list. A walker is no head to take a prefix of.
func TestPrefix(t *testing.T) {
	raw, frames := framedList(5000, 1024)
	at := frames[len(frames)/2]
	hs := newTreeSink()
	head := NewDecoder(bytes.NewReader(raw), hs, DefaultLimits)
	if reached, err := head.DecodeTo(at); !reached || err != nil {
		t.Fatalf("DecodeTo(%d) = %v, %v", at, reached, err)
	}
	p, err := head.Prefix()
	if err != nil {
		t.Fatal(err)
	}
	ws := &internSink{ids: map[string]uint64{}}
	walk := NewDecoder(bytes.NewReader(raw[:at]), ws, DefaultLimits)
	if _, err := walk.Walk(math.MaxInt64); !errors.Is(err, ErrNoSplit) || !walk.AtEnd() {
		t.Fatalf("walking to %d: %v", at, err)
	}
	if p.Memoized() != walk.Memoized() || p.Memoized() < 2000 {
		t.Fatalf("the prefix holds %d entries, the walk %d", p.Memoized(), walk.Memoized())
	}
	if _, err := head.Decode(); err != nil {
		t.Fatal(err)
	}
	sameMemo(t, "prefix", p, hs.strs, walk, ws.strings)
	if v, _ := p.MemoValue(0); v.Kind != KindForeign || v.N != 0 {
		t.Errorf("the list's entry: %v, want its placeholder", v)
	}
	if _, err := walk.Prefix(); !errors.Is(err, ErrNoSplit) {
		t.Errorf("a walker's prefix: %v, want ErrNoSplit", err)
	}
}

// A stretch that starts at a MEMOIZE cannot know what it stores, and one
// that stores at an explicit id cannot number it: both end the walk.
func TestStretchRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"MEMOIZE first": {opMemoize, opMark, opNone, opAppends},
		"BINPUT":        {opNone, opBinPut, 7, opMark},
	} {
		d := NewDecoder(bytes.NewReader(b), newTreeSink(), DefaultLimits)
		d.Stretch(100, 4)
		if _, err := d.Walk(math.MaxInt64); !errors.Is(err, ErrNoSplit) || d.AtEnd() {
			t.Errorf("%s: %v at %d, want ErrNoSplit before the end", name, err, d.Offset())
		}
	}
}

// A dict with more memoized values than an entry walked at once can note
// is walked opcode by opcode, counting or not, and counted as such: no
// note past the entry's room.
func TestCountEntryRoom(t *testing.T) {
	b := []byte{opNone, opPop, opEmptyDict, opMemoize, opMark}
	for k := range maxEntryPuts + 2 {
		b = append(b, opBinGet, byte(k), opShortBinUnicode, 1, 'a', opMemoize)
	}
	b = append(b, opBinGet, 0, opEmptyList, opMemoize, opSetItems, opPop)
	b = append(b, bytes.Repeat([]byte{opNone, opPop}, 16)...)
	counts := map[bool]uint64{}
	for _, byOpcode := range []bool{false, true} {
		d := NewDecoder(bytes.NewReader(b), nopSink{}, DefaultLimits)
		d.Stretch(100, 4)
		d.Counting()
		d.walk.byOpcode = byOpcode
		if _, err := d.Walk(math.MaxInt64); !errors.Is(err, ErrNoSplit) || !d.AtEnd() {
			t.Fatalf("by opcode %v: %v at %d of %d", byOpcode, err, d.Offset(), len(b))
		}
		counts[byOpcode] = d.Memoized()
	}
	if want := uint64(maxEntryPuts + 4); counts[false] != want || counts[true] != want {
		t.Errorf("counted %d at once and %d by opcode, want %d", counts[false], counts[true], want)
	}
}

// internSink numbers the strings it is given in order, as a walker's
// builder interns them, and keeps them.
type internSink struct {
	nopSink
	strings []string
	ids     map[string]uint64
}

func (s *internSink) String(b []byte, isBytes bool) (Value, error) {
	id, ok := s.ids[string(b)]
	if !ok {
		id = uint64(len(s.strings))
		s.strings = append(s.strings, string(b))
		s.ids[string(b)] = id
	}
	return Value{Kind: KindString, N: id}, nil
}

// TestWalkEntries walks GPU-made snapshots whole, and from a frame in the
// middle as a stretch's walker does, with trace entries walked at once
// (walkEntry) and opcode by opcode: the split points, the memo and the
// strings interned must be the same, and on the bench seed nearly every
// entry must have been walked at once.
func TestWalkEntries(t *testing.T) {
	for _, name := range []string{"bench_source", "train_deep_leak", "forward_deep_mixed", "depth_loss_upcast_all"} {
		raw := gunzipFile(t, "../../testdata/scenarios/out/"+name+"/"+name+".pickle.gz")
		proto, starts, err := FramesNear(bytes.NewReader(raw), int64(len(raw)), []int64{int64(len(raw)) / 2})
		if err != nil || starts[0] < 0 {
			t.Fatalf("%s: no frame found past the middle: %d, %v", name, starts[0], err)
		}
		for _, from := range []int64{0, starts[0]} {
			type walked struct {
				splits  []int64
				end     error
				memo    []uint32
				strings []string
				entries int
			}
			type counted struct {
				n     uint64
				marks []Mark
			}
			var counts []counted
			walkAll := func(byOpcode, count bool) walked {
				s := &internSink{ids: map[string]uint64{}}
				d := NewDecoder(bytes.NewReader(raw[from:]), s, DefaultLimits)
				if from > 0 {
					d.Stretch(from, proto)
				} else {
					d.walk = &walk{last: -1}
				}
				if count {
					d.Counting()
					defer func() { counts = append(counts, counted{d.Memoized(), d.Marks()}) }()
				}
				d.walk.byOpcode = byOpcode
				var w walked
				for {
					off, err := d.Walk(0)
					if err != nil {
						w.end = err
						break
					}
					w.splits = append(w.splits, off)
				}
				for id := range d.memo.n {
					if count {
						break // a count keeps no entry
					}
					w.memo = append(w.memo, *d.memo.slot(id))
				}
				w.strings, w.entries = s.strings, d.walk.entries
				return w
			}
			got, want := walkAll(false, false), walkAll(true, false)
			if !errors.Is(got.end, ErrNoSplit) || !errors.Is(want.end, ErrNoSplit) {
				t.Errorf("%s from %d: walks ended with %v and %v, want ErrNoSplit", name, from, got.end, want.end)
			}
			if want.entries != 0 || !slices.Equal(got.splits, want.splits) || !slices.Equal(got.memo, want.memo) ||
				!slices.Equal(got.strings, want.strings) {
				t.Errorf("%s from %d: %d entries walked at once, %d splits, %d memo entries, %d strings; by opcode %d, %d, %d, %d",
					name, from, got.entries, len(got.splits), len(got.memo), len(got.strings),
					want.entries, len(want.splits), len(want.memo), len(want.strings))
			}
			// A counting walk, by entry or by opcode, stops where the walk
			// does and counts what it memoized.
			if from > 0 {
				c, o := walkAll(false, true), walkAll(true, true)
				if !slices.Equal(c.splits, want.splits) || !slices.Equal(o.splits, want.splits) ||
					counts[0].n != uint64(len(want.memo)) || counts[1].n != counts[0].n || !slices.Equal(counts[0].marks, counts[1].marks) ||
					c.entries == 0 || o.entries != 0 {
					t.Errorf("%s from %d: counted %d (%d entries at once) and %d by opcode, %d and %d splits, %d and %d marks; the walk memoized %d, %d splits",
						name, from, counts[0].n, c.entries, counts[1].n, len(c.splits), len(o.splits), len(counts[0].marks), len(counts[1].marks), len(want.memo), len(want.splits))
				}
			}
			// An entry that runs past the end of the read buffer is walked
			// opcode by opcode: about one a buffer (the 256 KiB buffers
			// walk 299,996 of the seed's 300,259 entries at once).
			if name == "bench_source" && from == 0 && got.entries < 299900 {
				t.Errorf("bench seed: %d entries walked at once, want all but about one a read buffer of its 300 k", got.entries)
			}
		}
	}
}

// TailMemo accepts a tail's memo entries by kind, narrow and wide alike,
// and lists the head's entries the tail's copy; a tail's memo of narrow
// entries only is checked by the set of their kinds.
func TestTailMemo(t *testing.T) {
	narrow := []byte{opProto, 4, opEmptyList, opMemoize, opMark, opEmptyDict, opMemoize, opAppends}
	narrowStart := int64(len(narrow))
	narrow = append(narrow, opMark, opShortBinUnicode, 1, 'a', opMemoize, opBinInt1, 7, opMemoize, opAppends, opStop) // ids 2, 3
	for _, tc := range []struct {
		name   string
		refuse Kind
		all    bool
	}{
		{"narrow: every kind", KindNone, true},
		{"narrow: no str", KindString, false},
		{"narrow: no int", KindInt, false},
		{"narrow: no float (none there)", KindFloat, true},
	} {
		d := forkAt(t, narrow, narrowStart, nopSink{})
		if _, _, err := d.DecodeTail(nil); err != nil {
			t.Fatal(err)
		}
		if foreign, all := d.TailMemo(func(k Kind) bool { return k != tc.refuse }); all != tc.all || foreign != nil {
			t.Errorf("%s: TailMemo = %v, %v; want no foreign ids, %v", tc.name, foreign, all, tc.all)
		}
	}
	b := []byte{opProto, 4, opEmptyList, opMemoize, opMark, opEmptyDict, opMemoize, opAppends} // ids 0, 1
	start := int64(len(b))
	b = append(b, opMark, opLongBinGet, 1, 0, 0, 0, opMemoize)                                         // id 2: a copy of the head's dict
	b = append(b, opShortBinUnicode, 1, 'a', opMemoize)                                                // id 3
	b = append(binary.BigEndian.AppendUint64(append(b, opBinFloat), math.Float64bits(1.5)), opMemoize) // id 4: wide
	b = append(b, opBinInt1, 7, opMemoize, opAppends, opStop)                                          // id 5
	for _, tc := range []struct {
		name    string
		refuse  Kind
		foreign []uint64
		all     bool
	}{
		{"every kind", KindNone, []uint64{1}, true},
		{"no str", KindString, nil, false},
		{"no float, kept wide", KindFloat, nil, false},
		{"no copy of the head's", KindForeign, nil, false},
	} {
		d := forkAt(t, b, start, nopSink{}) // which takes the copy of the head's dict as an item
		if _, _, err := d.DecodeTail(nil); err != nil {
			t.Fatal(err)
		}
		foreign, all := d.TailMemo(func(k Kind) bool { return k != tc.refuse })
		if all != tc.all || !slices.Equal(foreign, tc.foreign) {
			t.Errorf("%s: TailMemo = %v, %v; want %v, %v", tc.name, foreign, all, tc.foreign, tc.all)
		}
	}
}
