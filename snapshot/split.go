package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/trace"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/vramscope/vramscope/internal/pickle"
)

// Decoding a big file on several cores (internal/pickle/split.go has the
// VM's side). The file is cut at frames into stretches, one per part, and
// a walker per stretch walks it on a goroutine of its own, all at once,
// finding where its stretch's first batch of the trace list starts (a
// tail's start). The first stretch's walker keeps what it memoizes; the
// others only count it. Meanwhile the head decodes the first stretch into
// its builder. Once the walkers are done, each tail decodes from its start
// up to the next tail's (or the list's end) into a builder of its own,
// from the first stretch's memo, reading the few entries of the counted
// stretches it needs by walking their frames again (tailReads). The head
// then renumbers each tail's records into its builder in turn, and goes on
// after the last. Whatever a tail could not do, the head does alone, so
// the result is always the sequential one.
const (
	// splitMin is the smallest file worth a second goroutine.
	splitMin = 32 << 20
	// partMin is the least a part of a split file gets: below it a core
	// saves less than a tail costs to start and merge.
	partMin = 16 << 20
)

// decodeParts is how many parts a raw file of size bytes is decoded in on
// cores cores: one per core, each of at least partMin bytes. cores <= 0 is
// every core the process may use (GOMAXPROCS, which Go derives from the
// cgroup's CPU quota as well as the machine's cores since 1.25).
func decodeParts(size int64, cores int) int {
	if cores <= 0 {
		cores = runtime.GOMAXPROCS(0)
	}
	return int(min(int64(cores), max(size/partMin, 1)))
}

// splitCuts gives where stretches 1..n-1 of a file of size bytes cut in n
// parts are to start (each at the first frame from there on).
type splitCuts func(size int64, n int) []int64

// walkCost is what walking a byte costs against decoding it: 0.3 on one
// core (callgrind: 320 M against 1,044 M instructions for the first 29 MB
// of a grown bench file), 0.45 measured with two cores sharing a memory
// bus. The walk has been about 20% faster since its commonest opcodes
// skip the table (pickle.scanFast). On the GPU host a 2-core decode of
// the 996 MB bench file walked 0.41 of decoding's time a byte in a fast
// lease and 0.35 in a slow one (2026-12-03). Since trace entries are
// decoded by shape the walker walked the rest of the head's part in
// 420-500 ms there, while the head took 500-620 ms for the first stretch:
// 0.32 (bench/RESULTS.md, 2026-12-04).
const walkCost = 0.32

// countCost is what counting a byte's memo entries costs against decoding
// it, beside a decoder. Alone, counting (trace entries a dict at once, as
// the walk takes them) runs at 4.0 GB/s on the bench seed where the walk
// runs at 3.0 (BenchmarkCount, BenchmarkWalk). Beside the head, both
// reading the file, it counted the 428 MB of a 2-core decode of the 996 MB
// bench file in 110-112 ms while the head decoded 0.95 ms a MB: 0.27.
// Cuts from 0.28 and 0.33 decoded that file in the same 0.57-0.60 s (dev
// VM, 4 runs each in turns, 2026-12-07).
const countCost = 0.28

// balancedCuts makes the parts end together. The tails start once the
// walkers are done, while the head decodes its part from the start, so
// the head's part is the larger by what the head decodes meanwhile. With
// tails of P bytes and the head's part of P0 = headShare P, stretch k
// starts at (k + headShare) size / (n - 1 + headShare). The first
// stretch is walked while the others are counted, all at once, and its
// walk takes as long as counting a tail's stretch (headStretch): in
// decoding's time the head decodes countCost P meanwhile, P0 = P +
// countCost P. With 2 parts the head decodes the first stretch itself
// while one walker counts the rest of its part, in as long, and the tail
// then starts: the same.
func balancedCuts(size int64, n int) []int64 {
	const headShare = 1 + countCost
	cuts := make([]int64, n-1)
	for k := range cuts {
		cuts[k] = int64(float64(size) * (float64(k) + headShare) / (float64(n-1) + headShare))
	}
	return cuts
}

// headStretch is where the head's part, which ends at cut, is cut in two
// stretches: the first walked whole, the second counted, in the same time.
// With more than 2 parts a walker walks the first while the tails'
// stretches are counted: walkCost s = countCost P, with P = cut/(1 +
// countCost). With 2 the head decodes the first itself while one walker
// counts the second: countCost (cut - s) = s.
func headStretch(cut int64, n int) int64 {
	if n == 2 {
		return int64(float64(cut) * countCost / (1 + countCost))
	}
	return int64(float64(cut) * min(1, countCost/walkCost) / (1 + countCost))
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

// part is one tail of a split decode, as startTails starts it.
type part struct {
	start int64
	next  int64 // where the next tail starts, where this one ends; -1: none
	done  chan tailResult
}

// endsAt says whether the tail ends at the batch at off: where the next
// tail starts.
func (p *part) endsAt(off int64) bool { return p.next >= 0 && off >= p.next }

// ReadAt decodes the snapshot held in the first size bytes of r, raw or
// compressed as for Read; a big raw pickle is decoded on several
// goroutines.
func ReadAt(r io.ReaderAt, size int64) (*Snapshot, error) { return readAt(r, size, 0) }

// readAt is ReadAt on cores cores (decodeParts).
func readAt(r io.ReaderAt, size int64, cores int) (*Snapshot, error) {
	magic := make([]byte, 4)
	n, _ := quiet(r).ReadAt(magic, 0)
	// With one core the tails' walk would only add work.
	parts := decodeParts(size, cores)
	if size < splitMin || Compressed(magic[:n]) || parts < 2 {
		return readStream(io.NewSectionReader(r, 0, size), size)
	}
	sn, _, err := decodeSplit(atSource{r, size}, parts, balancedCuts)
	return sn, err
}

// errNoMapping says a file is read at offsets: the system cannot map it.
var errNoMapping = errors.New("the file cannot be mapped")

// ReadFile decodes the snapshot held in the first size bytes of f as ReadAt
// does. A big raw file is read through a read-only mapping where the
// system has one, while no more than mapParts decoders of the process do
// (mapSlots), in place instead of copied into buffers (on the 996 MB bench
// file the copies cost 0.2 s of CPU time), and the pages each decoder has
// passed are let go, so the file does not add to the resident memory.
// Otherwise it is read at offsets. A big compressed file is decompressed
// into a temporary file first where that pays (readDecompressed).
// progress, if not nil, is told from any goroutine how many bytes the
// decoders have read in all (the walkers, which run ahead of them, do not
// count): several read at once, each its part; the file's size at the end. It decodes on cores
// goroutines at most (0: on every core): analyze, which decodes several
// files at once, shares the cores among them.
func ReadFile(f *os.File, size int64, cores int, progress func(off int64)) (*Snapshot, error) {
	return readFile(f, size, cores, progress, true)
}

// readFile is ReadFile, which goes by way of a temporary file only if
// viaTemp: the temporary file's own content is decoded as it is.
func readFile(f *os.File, size int64, cores int, progress func(off int64), viaTemp bool) (*Snapshot, error) {
	head := streamHead(f)
	parts := decodeParts(size, cores)
	switch {
	case Compressed(head):
		if viaTemp {
			if sn, ok := readDecompressed(f, size, head, cores, progress); ok {
				return sn, nil
			}
		}
	case size >= splitMin:
		if release, ok := mapSlots(parts); ok {
			defer release()
			if m, err := mapFile(f, size); err == nil {
				defer m.close()
				return readMapped(m, f, parts, progress)
			}
		}
	}
	var r io.ReaderAt = f
	if progress != nil {
		r = progressReaderAt{f, progress, new(atomic.Int64)}
	}
	return readAt(r, size, cores)
}

// mapParts is the most parts a mapped file is decoded in. Each decoder
// over the mapping keeps up to a releaseStep of the file resident, and
// their page faults contend: analyze of the 996 MB bench file on 16 cores
// took 2.03-2.23 s and 519-523 MB through the mapping, 1.79-2.12 s and
// 480-484 MB reading at offsets; on 2, 4 and 8 cores both held the same
// and the mapping was as fast or faster (on 2 cores 5.0-6.2 s against
// 5.7-7.0 s, 1.5 s less CPU time).
const mapParts = 8

// mappedDecoders counts the decoders of this process reading files
// through mappings: analyze decodes several files at once, as many as it
// has cores, each in parts.
var mappedDecoders atomic.Int64

// mapSlots takes parts of the mapParts decoders that may read through
// mappings at once, if that many are free, and returns what gives them
// back. A decode in one part, as analyze makes of each file of a folder
// or on one core, was read into buffers: analyze of the 996 MB bench file
// on one core took 2.04-2.37 s mapped against 2.42-2.67 s, and of two
// 300 MB files at once on 2 cores 0.71-0.77 s against 0.82-0.94 s
// (bench/RESULTS.md, Dec 8).
func mapSlots(parts int) (release func(), ok bool) {
	n := int64(parts)
	if mappedDecoders.Add(n) > mapParts {
		mappedDecoders.Add(-n)
		return nil, false
	}
	return func() { mappedDecoders.Add(-n) }, true
}

// readMapped decodes the raw pickle mapped in m, from f, on several
// goroutines. A file that shrinks while it is mapped makes the reads past
// its new end fault: that is an error here, not a crash.
func readMapped(m *mapping, f io.ReaderAt, parts int, progress func(off int64)) (sn *Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	src := bytesSource{b: m.b, release: m.release, progress: progress, tally: new(passage), file: f}
	sn, _, err = decodeSplit(src, parts, balancedCuts)
	if err == nil && progress != nil {
		progress(src.size())
	}
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

// progressReaderAt tells progress how many bytes were read through it in
// all: the decoders of a split file read their parts at once.
type progressReaderAt struct {
	r        io.ReaderAt
	progress func(n int64)
	read     *atomic.Int64
}

func (p progressReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	p.progress(p.read.Add(int64(n)))
	return n, err
}

// quiet is r without the progress reports: for what reads ahead of the
// decoders.
func quiet(r io.ReaderAt) io.ReaderAt {
	if p, ok := r.(progressReaderAt); ok {
		return p.r
	}
	return r
}

// decodeSplit decodes the raw pickle src in up to n parts, stretch k
// (1..n-1) starting at the first frame at or after cut's k-th offset and
// tail k at the stretch's first batch of a list, and reports how many
// tails' work was used.
func decodeSplit(src source, n int, cut splitCuts) (*Snapshot, int, error) {
	size := src.size()
	var proto int
	var starts []int64
	tails := map[int64]bool{} // the stretches that start a tail, by start
	if n >= 2 {
		// The head's part, the largest, is in two stretches (headStretch).
		// An error reading leaves the head alone to report it.
		cuts := cut(size, n)
		var at []int64
		var err error
		if proto, at, err = pickle.FramesNear(src.readerAt(), size, append([]int64{headStretch(cuts[0], n)}, cuts...)); err != nil {
			at = nil
		}
		for k, s := range at {
			if s < 0 {
				continue
			}
			if len(starts) == 0 || s > starts[len(starts)-1] {
				starts = append(starts, s)
			}
			tails[s] = tails[s] || k > 0
		}
	}
	budget := new(pickle.SharedBudget) // all parts hold what one decoder may
	var prefix chan stretchWalk        // with one tail, the first stretch's walk, which the head makes
	parts := make(chan *part, len(starts))
	first := make(chan int64, 1) // where the first tail may start
	if ft := firstTail(starts, tails); ft < 0 {
		close(parts)
		first <- -1
	} else {
		walks := make([]chan stretchWalk, len(starts)+1)
		for k := range walks {
			from, to := int64(0), size
			if k > 0 {
				from = starts[k-1]
			}
			if k < len(starts) {
				to = starts[k]
			}
			walks[k] = make(chan stretchWalk, 1)
			if k == 0 && n == 2 && len(starts) == 2 {
				prefix = walks[0] // the head decodes it (below)
				continue
			}
			found := func(int64) {}
			if k > 0 && from == ft {
				found = func(start int64) { first <- start }
			}
			go func() { walks[k] <- walkStretch(src, proto, from, to, k == len(starts), k > 0, budget, found) }()
		}
		go startTails(src, proto, budget, walks, tails, parts)
	}

	// The tails read src until they end, whatever happens here: src (a
	// mapping, unmapped after) must outlive them.
	var waiting *part
	defer func() {
		if prefix != nil {
			prefix <- stretchWalk{start: -1} // the head stopped first: no tail
		}
		if waiting != nil {
			<-waiting.done
		}
		for p := range parts {
			<-p.done
		}
	}()
	b := newBuilder()
	dec := src.decoder(b)
	dec.ShareBudget(budget)
	if prefix != nil {
		// The first stretch is the head's: its memo there is that
		// stretch's walk.
		at, err := dec.DecodeTo(starts[0])
		if err != nil {
			return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
		}
		prefix <- b.prefixWalk(dec, at)
		prefix = nil
	}
	// While the walkers walk, the head decodes up to where the first tail
	// may start.
	if start := <-first; start > 0 {
		if _, err := dec.DecodeTo(start); err != nil {
			return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
		}
	}
	merged := 0
	for p := range parts {
		waiting = p
		at, err := dec.DecodeTo(p.start)
		if err != nil {
			return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
		}
		t := <-p.done
		waiting = nil
		if at && t.err == nil && b.canMerge(dec, &t) {
			// The head's steps alone are regions of an execution trace
			// (bench/tracecores).
			r := trace.StartRegion(context.Background(), "decode.merge")
			m := b.merge(dec, &t)
			r.End()
			if err := dec.Splice(t.d, m.value, src.from(t.end)); err != nil {
				return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
			}
			src.spliced(t.end - p.start)
			merged++
		} else if t.d != nil {
			t.d.LeaveBudget()
		}
	}
	r := trace.StartRegion(context.Background(), "decode.rest")
	top, err := dec.Decode()
	r.End()
	b.sn.Protocol = dec.Protocol()
	if err == nil {
		trace.WithRegion(context.Background(), "decode.finish", func() { err = b.finish(top) })
	}
	if err != nil {
		return nil, 0, fmt.Errorf("decoding snapshot: %w", err)
	}
	return b.sn, merged, nil
}

// firstTail is the start of the first stretch that starts a tail, or -1.
func firstTail(starts []int64, tails map[int64]bool) int64 {
	for _, s := range starts {
		if tails[s] {
			return s
		}
	}
	return -1
}

// stretchWalk is what the walker of one stretch found.
type stretchWalk struct {
	d *pickle.Decoder
	b *builder // its sink: the strings it memoized
	// start is the stretch's first batch, where a tail starts (-1: none),
	// and memoized how many memo entries the walk had made there.
	start    int64
	memoized uint64
	whole    bool          // walked to the stretch's end
	from     int64         // where the stretch starts
	marks    []pickle.Mark // a counting walk's (pickle.Counting)
}

// prefixWalk is the walk of the first stretch that the head, dec, made by
// decoding it, if at says it stopped where the second starts: its memo and
// the strings interned so far.
func (b *builder) prefixWalk(dec *pickle.Decoder, at bool) stretchWalk {
	w := stretchWalk{start: -1}
	if !at {
		return w
	}
	d, err := dec.Prefix()
	if err != nil {
		return w
	}
	w.d, w.b, w.whole = d, newBuilder(), true
	w.b.sn.strings = slices.Clone(b.sn.strings)
	return w
}

// walkStretch walks the stretch of src from from to to, counting its memo
// entries if count, telling found where its first batch starts; the
// walker of the last stretch stops there, the others walk on to the
// stretch's end. Stretch 0's batches start no tail: the head decodes it.
func walkStretch(src source, proto int, from, to int64, last, count bool, budget *pickle.SharedBudget, found func(int64)) (w stretchWalk) {
	w.start, w.from = -1, from
	told := false
	defer func() {
		if !told {
			found(-1)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			faultError(r) // a fault ends the walk: the head reports it, if it reads there too
			w.whole = false
		}
	}()
	w.b = newBuilder()
	w.d = src.stretch(w.b, proto, from, to)
	w.d.ShareBudget(budget)
	if count {
		w.d.Counting()
		defer func() { w.marks = w.d.Marks() }()
	}
	if from > 0 {
		start, err := w.d.Walk(from)
		if err != nil {
			w.whole = errors.Is(err, pickle.ErrNoSplit) && w.d.AtEnd() && w.d.Offset() == to // no batch in it
			return w
		}
		w.start, w.memoized = start, w.d.Memoized()
		found(start)
		told = true
		if last {
			return w
		}
	}
	_, err := w.d.Walk(math.MaxInt64)
	w.whole = errors.Is(err, pickle.ErrNoSplit) && w.d.AtEnd() && w.d.Offset() == to
	return w
}

// startTails starts, once the walks are done, the tails of the
// stretches that have a batch, as far as every stretch before was walked
// whole, each decoding on a goroutine of its own from the first stretch's
// memo, sending them to parts in order; it closes parts when all started.
func startTails(src source, proto int, budget *pickle.SharedBudget, walks []chan stretchWalk, tails map[int64]bool, parts chan<- *part) {
	defer close(parts)
	ws := make([]stretchWalk, len(walks))
	for k, c := range walks {
		ws[k] = <-c
	}
	// The stretches whose memo the tails can have: up to the first not
	// walked whole, which still has a tail if its walk reached its batch.
	usable := 1
	for usable < len(ws) && ws[usable-1].whole && ws[usable-1].d != nil {
		usable++
	}
	if ws[usable-1].start < 0 {
		usable--
	}
	if usable < 2 {
		return
	}
	// The counted stretches' entries follow the first stretch's, one
	// stretch after the other.
	first := ws[0]
	counted := make([]pickle.Counted, 0, usable-1)
	n := first.d.Memoized()
	for _, w := range ws[1:usable] {
		counted = append(counted, pickle.Counted{First: n, Marks: w.marks})
		n += w.d.Memoized()
	}
	var ps []*part
	var ds []*pickle.Decoder
	var bs []*builder
	for k := 1; k < usable; k++ {
		w := ws[k]
		if w.start < 0 || !tails[w.from] {
			continue
		}
		// The tail's builder numbers the first stretch's strings as its
		// walk did: the memo holds them.
		b := newBuilder()
		for _, s := range first.b.sn.strings {
			b.sn.InternString(s)
		}
		if len(b.sn.strings) != len(first.b.sn.strings) {
			break
		}
		b.syncStrings()
		r := &tailReads{src: src, proto: proto, budget: budget, counted: counted[:k], b: b}
		d, err := src.fork(first.d, b, w.start, counted[k-1].First+w.memoized, r.read)
		if err != nil {
			break
		}
		if n := len(ps); n > 0 {
			ps[n-1].next = w.start
		}
		ps = append(ps, &part{start: w.start, next: -1, done: make(chan tailResult, 1)})
		ds = append(ds, d)
		bs = append(bs, b)
	}
	for i, p := range ps {
		go decodeTail(ds[i], bs[i], p)
		parts <- p
	}
}

// tailReads reads, for a tail, the entries of the counted stretches
// between the first stretch and the tail's start, walking again the frame
// that holds one (pickle's Reread), each once: a tail of the 996 MB bench
// file reads one of them at most, a tail of a real snapshot a few strings
// (the file names of frames first seen there: bench/memo_refs.py). A tail
// that would walk more than maxReread bytes again fails, and the head
// decodes its part: a stretch whose frames are far apart (one frame of a
// hostile file) costs no more than that.
type tailReads struct {
	src     source
	proto   int
	budget  *pickle.SharedBudget
	counted []pickle.Counted
	b       *builder // the tail's: the strings read are its values
	cache   map[uint64]pickle.Value
	walked  int64 // bytes walked again
}

// maxReread is what a tail may walk again: 1,024 of CPython's 64 KiB
// frames.
const maxReread = 64 << 20

func (r *tailReads) read(id uint64) (pickle.Value, bool) {
	if v, ok := r.cache[id]; ok {
		return v, true
	}
	k := sort.Search(len(r.counted), func(k int) bool { return r.counted[k].First > id }) - 1
	if k < 0 {
		return pickle.Value{}, false
	}
	from, to, ok := r.counted[k].Frame(id)
	if r.walked += to - from; !ok || r.walked > maxReread {
		return pickle.Value{}, false
	}
	wb := newBuilder()
	v, ok := r.counted[k].Reread(id, func(from, to int64) *pickle.Decoder {
		d := r.src.stretch(wb, r.proto, from, to)
		d.ShareBudget(r.budget)
		return d
	})
	if !ok {
		return pickle.Value{}, false
	}
	if v.Kind == pickle.KindString || v.Kind == pickle.KindBytes {
		v, _ = r.b.String([]byte(wb.sn.strings[v.N]), v.Kind == pickle.KindBytes)
	}
	if r.cache == nil {
		r.cache = map[uint64]pickle.Value{}
	}
	r.cache[id] = v
	return v, true
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
	if hl.isGen || hl.idx != nil || hl.elem != vEvent || hl.start+hl.n != b.eventCount() {
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
	foreign, ok := t.d.TailMemo(func(k pickle.Kind) bool {
		switch k {
		case pickle.KindNone, pickle.KindBool, pickle.KindInt, pickle.KindUint, pickle.KindFloat,
			pickle.KindString, pickle.KindBytes, pickle.KindForeign, vFrame, vStack, vEvent, vEmpty:
			return true
		}
		return false
	})
	if !ok {
		return errors.New("the tail's memo holds a value the head cannot take")
	}
	t.foreignMemo = foreign
	return nil
}

// tailMaps renumber a tail's interned values into the head's.
type tailMaps struct {
	head          *pickle.Decoder
	foreignStacks []StackID // the head's stacks the tail's foreignStacks name
	strings       []StringID
	frames        []FrameID
	stacks        []StackID
	streams       []StreamID
	events        int // the head's events before the tail's
}

// merge moves the tail's records into b (canMerge has checked them) in the
// order a sequential decode would have interned them, appends its entries
// to the list on top of head's stack, and returns the renumbering.
func (b *builder) merge(head *pickle.Decoder, t *tailResult) *tailMaps {
	tb, sn := t.b, b.sn
	m := &tailMaps{head: head, events: b.eventCount()}
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
	for _, id := range tb.foreignStacks {
		s := EmptyStack
		if v, _ := head.MemoValue(id); v.Kind != vEmpty {
			s = StackID(v.N)
		}
		m.foreignStacks = append(m.foreignStacks, s)
	}
	for k, n := range tb.sn.Unknown {
		sn.Unknown[k] += n
	}
	n := tb.events.n
	ctx := func(c Context) Context {
		return Context{CompileContext: m.strings[c.CompileContext], UserMetadata: m.strings[c.UserMetadata]}
	}
	after, first := b.eventCount(), b.firstEvent()
	b.appendLater(n, func() func() {
		// What touches this tail's events alone is done before the tails
		// merged earlier are in: renumbering them and, where appendArena
		// would take its chunks as they are, cutting them where b's will
		// be, which moves all but the first few. Done after those
		// tails, the cuts took 2-3 ms each, one after the other: the 15
		// merges of the 996 MB bench file ended 20 ms after the rest of
		// the file was decoded on 16 cores.
		t := &tb.events
		t.renumber(m.stack, m.streams)
		if first.ok && t.n > 0 && len(t.ctx) == 0 && t.base == first.base && ctx(t.contexts[0]) == first.context {
			cut := t.cutFor(after)
			return func() { b.events.appendCut(cut) }
		}
		return func() { b.events.appendArena(t, ctx) }
	})
	h, _ := head.Top()
	b.conts[h].l.n += n
	return m
}

// appendLater runs prepare, then the move it returns, which appends a
// tail's n events to b.events, on a goroutine, the move after the moves of
// the tails merged before: the head goes on meanwhile, merging the next
// tail and decoding the rest. Moving a
// tail's events is most of its merge (the shift to the head's chunk
// boundary: 37 of the 47 ms that the 15 merges of the 996 MB bench file
// took on 16 cores), and the rest of the file (its annotations) took
// another 42-55 ms on the head alone.
func (b *builder) appendLater(n int, prepare func() (move func())) {
	total := b.eventCount() + n
	prev, done := b.appended, make(chan struct{})
	go func() {
		move := prepare()
		if prev != nil {
			<-prev
		}
		move()
		close(done)
	}()
	b.appended, b.appendedN = done, total
}

// firstEvent is what of b's events a tail's must match to be appended as
// they are: the first event's epoch and context, which later events do not
// change. Read while no tail's events are being appended (the head's own
// come first), it is kept for the merges that follow.
func (b *builder) firstEvent() arenaFirst {
	if b.appended == nil && b.events.n > 0 {
		b.first = arenaFirst{ok: true, base: b.events.base, context: b.events.contexts[0]}
	}
	return b.first
}

// arenaFirst is firstEvent's: ok says it was read.
type arenaFirst struct {
	ok      bool
	base    packBase
	context Context
}

// syncEvents waits until the events of every tail merged are in b.events.
func (b *builder) syncEvents() {
	if b.appended != nil {
		<-b.appended
		b.appended = nil
	}
}

// eventCount is how many events b holds, those still being appended
// included.
func (b *builder) eventCount() int {
	if b.appended != nil {
		return b.appendedN
	}
	return b.events.n
}

// push pushes an event, once the merged tails' are in.
func (b *builder) push(e Event, c Context) int {
	b.syncEvents()
	return b.events.push(&e, c)
}

// frame renumbers a tail's frame id.
func (m *tailMaps) frame(f FrameID) FrameID {
	if f&foreignTag != 0 {
		v, _ := m.head.MemoValue(uint64(f &^ foreignTag))
		return FrameID(v.N)
	}
	return m.frames[f]
}

// stack renumbers a tail's stack id. It reads no memo: the events are
// renumbered while the head goes on (appendLater).
func (m *tailMaps) stack(s StackID) StackID {
	if s >= foreignStackBase {
		return m.foreignStacks[s-foreignStackBase]
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
