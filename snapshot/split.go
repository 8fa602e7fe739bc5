package snapshot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/vramscope/vramscope/internal/pickle"
)

// Decoding a big file on several cores (internal/pickle/split.go has the
// VM's side). One goroutine walks the file, stopping at a batch of the
// trace list past each split point to start a tail there, which decodes up
// to the next tail's start (or the list's end) into a builder of its own,
// while this one decodes up to the first tail (the head). Each tail's
// records are then renumbered into the head's builder in turn, and the
// head goes on after the last. Whatever a tail could not do, the head does
// alone, so the result is always the sequential one.
const (
	// splitMin is the smallest file worth a second goroutine.
	splitMin = 32 << 20
	// partMin is the least a part of a split file gets: below it a core
	// saves less than a tail costs to start and merge.
	partMin = 16 << 20
	// headStep is how far the head decodes between two looks at whether
	// the walk has chosen the split point.
	headStep = 4 << 20
)

// splitParts is how many parts a raw file of size bytes is decoded in: one
// per core the process may use (GOMAXPROCS, which Go derives from the
// cgroup's CPU quota as well as the machine's cores since 1.25), each of
// at least partMin bytes.
func splitParts(size int64) int {
	return int(min(int64(runtime.GOMAXPROCS(0)), max(size/partMin, 1)))
}

// splitPoints gives where tail k (1..n-1) of a file of size bytes cut in n
// parts is to start, once the head has read head bytes while the walk,
// started at the same time, walked walked bytes.
type splitPoints func(size, head, walked int64, k, n int) int64

// balancedSplit is the split point of tail k that makes all n parts end
// together. With the head's decoding rate h, the walk's rate w, r = h/w,
// and each tail decoding as fast as the head, the head ends at s_1/h and
// tail k, which starts when the walk reaches s_k, at s_k/w +
// (s_k+1 - s_k)/h; equal ends give s_k = size (1-q^k) / (1-q^n) with
// q = 1-r (for n = 2: size/(2-r)). The rates depend on the machine more
// than on the file: the walk costs about 0.3 of decoding on one core
// (callgrind: 320 M against 1,044 M instructions for the first 29 MB of a
// grown bench file), but cores that share a memory bus slow the walk more
// than the decoder (measured on a 2-vCPU VM: h/w = 0.45, against the fixed
// 0.3 the first version assumed, which left the head waiting 0.25 s of
// 1.8 s for the tail). With the walk as the one sequential stage, n parts
// end after about r/(1-q^n) of the sequential decode: 0.3 of it for any n
// past 8, at r = 0.3.
func balancedSplit(size, head, walked int64, k, n int) int64 {
	ratio := 0.0
	if walked > 0 {
		ratio = min(float64(head)/float64(walked), 0.9)
	}
	if ratio == 0 {
		return size * int64(k) / int64(n)
	}
	q := 1 - ratio
	return int64(float64(size) * (1 - math.Pow(q, float64(k))) / (1 - math.Pow(q, float64(n))))
}

// foreignTag marks a tail's frame ids that stand for a memo entry of the
// head (pickle.KindForeign): the head's memo resolves them.
const foreignTag = 1 << 31

// foreignStackBase is the first pseudo stack id of a tail: the entries
// naming a frames list of the head's get one each (builder.foreignStacks),
// below the ids a packed event holds; the tail's own stacks stay below it.
const foreignStackBase = packStacks / 2

// foreignStack returns the pseudo stack id for the head's memo entry id.
func (b *builder) foreignStack(id uint64) (StackID, bool) {
	if s, ok := b.foreignStackOf[id]; ok {
		return s, true
	}
	if len(b.foreignStacks) >= packStacks-foreignStackBase {
		return 0, false
	}
	if b.foreignStackOf == nil {
		b.foreignStackOf = map[uint64]StackID{}
	}
	s := StackID(foreignStackBase + len(b.foreignStacks))
	b.foreignStacks = append(b.foreignStacks, id)
	b.foreignStackOf[id] = s
	return s, true
}

func frameOf(v pickle.Value) FrameID {
	if v.Kind == pickle.KindForeign {
		return FrameID(foreignTag | v.N)
	}
	return FrameID(v.N)
}

// tailResult is what a tail's goroutine hands back.
type tailResult struct {
	b           *builder
	d           *pickle.Decoder
	list        pickle.Handle
	end         int64
	err         error
	foreignMemo []uint64 // head memo ids the tail's memo copies (checkMemo)
}

// part is one tail of a split decode, as the walk starts it.
type part struct {
	start int64
	// next is where the next tail starts once the walk has found it (-1
	// before): this one ends at that batch. Storing 0 stops it at its next
	// batch.
	next   atomic.Int64
	walked *atomic.Int64 // how far the walk has looked for the next tail
	done   chan tailResult
}

// endsAt says whether the tail ends at the batch at off: where the next
// tail starts. Until the walk has found that or passed off, it waits, so
// a tail never runs past the next one's start because the walk was late
// (the walk, 3 times as fast, is rarely behind).
func (p *part) endsAt(off int64) bool {
	for {
		walked := p.walked.Load() // before next: the walk stores next, then walks on
		if n := p.next.Load(); n >= 0 {
			return n <= off
		}
		if walked > off {
			return false
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// ReadAt decodes the snapshot held in the first size bytes of r, raw or
// compressed as for Read; a big raw pickle is decoded on several
// goroutines.
func ReadAt(r io.ReaderAt, size int64) (*Snapshot, error) {
	magic := make([]byte, 4)
	n, _ := r.ReadAt(magic, 0)
	// With one core the tails' walk would only add work.
	if size < splitMin || Compressed(magic[:n]) || splitParts(size) < 2 {
		return Read(io.NewSectionReader(r, 0, size))
	}
	sn, _, err := decodeSplit(atSource{r, size}, splitParts(size), balancedSplit)
	return sn, err
}

// errNoMapping says a file is read at offsets: the system cannot map it.
var errNoMapping = errors.New("the file cannot be mapped")

// ReadFile decodes the snapshot held in the first size bytes of f as ReadAt
// does. A big raw file is read through a read-only mapping where the system
// has one, in place instead of copied into buffers (on the 996 MB bench
// file the copies cost 0.2 s of CPU time), and the pages each decoder has
// passed are let go, so the file does not add to the resident memory.
// progress, if not nil, is told from any goroutine how far a decoder has
// read.
func ReadFile(f *os.File, size int64, progress func(off int64)) (*Snapshot, error) {
	if size >= splitMin && splitParts(size) >= 2 {
		if m, err := mapFile(f, size); err == nil {
			if !Compressed(m.b[:4]) {
				defer m.close()
				return readMapped(m, progress)
			}
			m.close()
		}
	}
	var r io.ReaderAt = f
	if progress != nil {
		r = progressReaderAt{f, progress}
	}
	return ReadAt(r, size)
}

// readMapped decodes the raw pickle mapped in m on several goroutines. A
// file that shrinks while it is mapped makes the reads past its new end
// fault: that is an error here, not a crash.
func readMapped(m *mapping, progress func(off int64)) (sn *Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	src := bytesSource{b: m.b, release: m.release, progress: progress}
	sn, _, err = decodeSplit(src, splitParts(src.size()), balancedSplit)
	return sn, err
}

// faultError is the error for the panic r of a memory fault (with
// debug.SetPanicOnFault); any other panic goes on.
func faultError(r any) error {
	if e, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Errorf("decoding snapshot: reading the mapped file faulted at %#x (did the file change while it was read?)", e.Addr())
	}
	panic(r)
}

// progressReaderAt tells progress where each read ends.
type progressReaderAt struct {
	r        io.ReaderAt
	progress func(off int64)
}

func (p progressReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	p.progress(off + int64(n))
	return n, err
}

// decodeSplit decodes the raw pickle src in up to n parts, tail k starting
// at the first batch of a list at or after the offset point gives, and
// reports how many tails' work was used.
func decodeSplit(src source, n int, point splitPoints) (*Snapshot, int, error) {
	size := src.size()
	var head atomic.Int64
	w := &walkProgress{moved: make(chan struct{}, 1)}
	parts := make(chan *part, n)
	budget := new(pickle.SharedBudget) // all parts hold what one decoder may
	go walkParts(src, n, budget, func(walked int64, k int) int64 {
		if k == 1 { // the head decodes up to the first tail only
			w.set(walked)
		}
		w.walked.Store(walked)
		return point(size, head.Load(), walked, k, n)
	}, &w.walked, parts)

	// The tails read src until they end, whatever happens here: src (a
	// mapping, unmapped after) must outlive them.
	var waiting *part
	defer func() {
		if waiting != nil {
			<-waiting.done
		}
		for p := range parts {
			<-p.done
		}
	}()
	b := newBuilder()
	dec := src.decoder(b, &head)
	dec.ShareBudget(budget)
	p, err := decodeUntilStart(dec, w, parts)
	if err != nil {
		return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
	}
	merged := 0
	for ; p != nil; p = <-parts {
		waiting = p
		at, err := dec.DecodeTo(p.start)
		if err != nil {
			return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
		}
		if !at {
			p.next.Store(0) // the head has passed it: stop it
		}
		t := <-p.done
		waiting = nil
		if at && t.err == nil && b.canMerge(dec, &t) {
			m := b.merge(dec, &t)
			if err := dec.Splice(t.d, m.value, src.from(t.end)); err != nil {
				return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
			}
			merged++
		} else if t.d != nil {
			t.d.LeaveBudget()
		}
	}
	top, err := dec.Decode()
	b.sn.Protocol = dec.Protocol()
	if err == nil {
		err = b.finish(top)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
	}
	return b.sn, merged, nil
}

// walkParts walks src and starts tails 1..n-1 where point(walked, k) says,
// each decoding on a goroutine of its own, and sends them to parts in
// order; it closes parts when the walk found no more split points or the
// last tail started. The last tail is the walk's own decoder. walked is
// how far the walk has come (point stores it), and past the end once the
// walk stopped. The walk and the tails share budget.
func walkParts(src source, n int, budget *pickle.SharedBudget, point func(walked int64, k int) int64, walked *atomic.Int64, parts chan<- *part) {
	defer close(parts)
	defer walked.Store(math.MaxInt64)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			faultError(r) // a fault ends the walk: the head reports it, if it reads there too
		}
	}()
	wb := newBuilder()
	walker := src.decoder(wb, nil)
	walker.ShareBudget(budget)
	var prev *part
	for k := 1; k < n; k++ {
		at := func(walked int64) int64 { return point(walked, k) }
		d, b := walker, wb
		var err error
		var start int64
		if k == n-1 {
			err = walker.ScanTail(at)
			start = walker.Offset()
		} else if start, err = walker.Walk(at); err == nil {
			b = newBuilder()
			b.internStrings(wb)
			d = src.fork(walker, b)
		}
		if err != nil {
			return
		}
		p := &part{start: start, walked: walked, done: make(chan tailResult, 1)}
		p.next.Store(-1)
		if prev != nil {
			prev.next.Store(start)
		}
		go decodeTail(d, b, p)
		parts <- p
		prev = p
	}
}

// internStrings interns the strings of from, a new builder that has only
// been given strings, in their order: a tail's builder then numbers them
// as the walk's does, which the memo they share holds.
func (b *builder) internStrings(from *builder) {
	for _, s := range from.sn.strings {
		b.sn.InternString(s)
	}
	b.syncStrings()
}

// decodeTail decodes tail p with d into b and hands the result to p.done.
func decodeTail(d *pickle.Decoder, b *builder, p *part) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			p.done <- tailResult{err: faultError(r)}
		}
	}()
	t := tailResult{b: b, d: d}
	if t.list, t.end, t.err = d.DecodeTail(p.endsAt); t.err == nil {
		t.err = t.checkMemo()
	}
	p.done <- t
}

// decodeUntilStart decodes with the head, at most headStep bytes at a time,
// until the walk sends the first tail (nil: none), and returns it. The
// head never passes the walk, whose split point lies ahead of it: having
// caught up, it waits for the walk to move on.
func decodeUntilStart(dec *pickle.Decoder, w *walkProgress, parts <-chan *part) (*part, error) {
	for {
		select {
		case p := <-parts:
			return p, nil
		default:
		}
		off := dec.Offset()
		target := min(off+headStep, w.off.Load())
		if target <= off {
			select {
			case p := <-parts:
				return p, nil
			case <-w.moved:
				continue
			}
		}
		if _, err := dec.DecodeTo(target); err != nil {
			return nil, err
		}
		if dec.Offset() < target { // the stream ended: nothing to split
			return <-parts, nil
		}
	}
}

// walkProgress is how far the walk has come: off for the head not to pass
// the first tail's start, walked for the tails to end where the next
// starts.
type walkProgress struct {
	off    atomic.Int64
	moved  chan struct{} // signalled (without blocking) when off grows
	walked atomic.Int64
}

func (w *walkProgress) set(off int64) {
	w.off.Store(off)
	select {
	case w.moved <- struct{}{}:
	default:
	}
}

// canMerge reports whether the tail t holds only what merge renumbers: trace
// entries appended to the list on top of the head's stack, in arena order,
// with their frames and stacks, whose references into the head resolve to
// frames and stacks.
func (b *builder) canMerge(head *pickle.Decoder, t *tailResult) bool {
	tb := t.b
	if tb.foreignKey || len(tb.segs)+len(tb.anns)+len(tb.hist)+len(tb.ranges)+len(tb.lists)+len(tb.dicts)+len(tb.sn.Blocks) > 0 {
		return false
	}
	tl := &tb.conts[t.list].l
	if tl.isGen || tl.idx != nil || tl.n != tb.events.n || tl.n > 0 && (tl.elem != vEvent || tl.start != 0) {
		return false
	}
	h, ok := head.Top()
	if !ok || int(h) >= len(b.conts) || b.conts[h].dict {
		return false
	}
	hl := &b.conts[h].l
	if hl.isGen || hl.idx != nil || hl.elem != vEvent || hl.start+hl.n != b.events.n {
		return false
	}
	resolves := func(id uint64, kinds ...pickle.Kind) bool {
		v, ok := head.MemoValue(id)
		if !ok {
			return false
		}
		for _, k := range kinds {
			if v.Kind == k {
				return true
			}
		}
		return false
	}
	for _, f := range tb.sn.stackFrames {
		if f&foreignTag != 0 && !resolves(uint64(f&^foreignTag), vFrame) {
			return false
		}
	}
	if tb.sn.NumStacks() > foreignStackBase {
		return false
	}
	for _, id := range tb.foreignStacks {
		if !resolves(id, vStack, vEmpty) {
			return false
		}
	}
	for _, id := range t.foreignMemo {
		if _, ok := head.MemoValue(id); !ok {
			return false
		}
	}
	return true
}

// checkMemo checks, on the tail's goroutine, that every memo entry the tail
// made is a value merge renumbers, and collects those that copy an entry
// of the head's, for canMerge to look up.
func (t *tailResult) checkMemo() error {
	ok := t.d.TailMemo(func(v pickle.Value) bool {
		switch v.Kind {
		case pickle.KindNone, pickle.KindBool, pickle.KindInt, pickle.KindUint, pickle.KindFloat,
			pickle.KindString, pickle.KindBytes, vFrame, vStack, vEvent, vEmpty:
			return true
		case pickle.KindForeign:
			t.foreignMemo = append(t.foreignMemo, v.N)
			return true
		}
		return false
	})
	if !ok {
		return errors.New("the tail's memo holds a value the head cannot take")
	}
	return nil
}

// tailMaps renumber a tail's interned values into the head's.
type tailMaps struct {
	head    *pickle.Decoder
	foreign []uint64 // the tail's foreignStacks
	strings []StringID
	frames  []FrameID
	stacks  []StackID
	streams []StreamID
	events  int // the head's events before the tail's
}

// merge moves the tail's records into b (canMerge has checked them) in the
// order a sequential decode would have interned them, appends its entries
// to the list on top of head's stack, and returns the renumbering.
func (b *builder) merge(head *pickle.Decoder, t *tailResult) *tailMaps {
	tb, sn := t.b, b.sn
	m := &tailMaps{head: head, foreign: tb.foreignStacks, events: b.events.n}
	for _, s := range tb.sn.strings {
		m.strings = append(m.strings, sn.InternString(s))
	}
	for _, f := range tb.sn.Frames {
		m.frames = append(m.frames, sn.InternFrame(f))
	}
	var frames []FrameID
	for id := range tb.sn.NumStacks() {
		s := StackID(id)
		if s > EmptyStack {
			frames = frames[:0]
			for _, f := range tb.sn.Stack(s) {
				frames = append(frames, m.frame(f))
			}
			s = sn.InternStack(frames)
		}
		m.stacks = append(m.stacks, s)
	}
	for _, raw := range tb.sn.Streams {
		m.streams = append(m.streams, sn.InternStream(raw))
	}
	for k, n := range tb.sn.Unknown {
		sn.Unknown[k] += n
	}
	n := tb.events.n
	tb.events.renumber(m.stack, m.streams)
	b.events.appendArena(&tb.events, func(c Context) Context {
		return Context{CompileContext: m.strings[c.CompileContext], UserMetadata: m.strings[c.UserMetadata]}
	})
	h, _ := head.Top()
	b.conts[h].l.n += n
	return m
}

// frame renumbers a tail's frame id.
func (m *tailMaps) frame(f FrameID) FrameID {
	if f&foreignTag != 0 {
		v, _ := m.head.MemoValue(uint64(f &^ foreignTag))
		return FrameID(v.N)
	}
	return m.frames[f]
}

// stack renumbers a tail's stack id.
func (m *tailMaps) stack(s StackID) StackID {
	if s >= foreignStackBase {
		v, _ := m.head.MemoValue(m.foreign[s-foreignStackBase])
		if v.Kind == vEmpty {
			return EmptyStack
		}
		return StackID(v.N)
	}
	return m.stacks[s]
}

// value renumbers a value of the tail's memo.
func (m *tailMaps) value(v pickle.Value) pickle.Value {
	switch v.Kind {
	case pickle.KindString, pickle.KindBytes:
		v.N = uint64(m.strings[v.N])
	case vFrame:
		v.N = uint64(m.frames[v.N])
	case vStack:
		v.N = uint64(m.stacks[v.N])
	case vEvent:
		v.N += uint64(m.events)
	case pickle.KindForeign:
		v, _ = m.head.MemoValue(v.N)
	}
	return v
}
