package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
)

// Decoding one stream on several cores.
//
// A memory snapshot is mostly one list, a device's trace, which the pickler
// writes in batches of 1,000 items: MARK, the items, APPENDS. From the MARK
// of any batch on, the rest of that list can be decoded by another decoder
// (a tail) into a sink of its own while the first (the head) decodes up to
// that MARK. The caller then merges the tail's records into the head's sink
// and the head skips what the tail decoded (Splice). With more cores the
// list is cut at several batches: each tail decodes from its MARK to the
// next tail's (or to the list's end), and the head splices them in order.
//
// What a tail needs of the bytes before its MARK is the memo: how many
// entries precede it (its base, from which it numbers its own) and what
// the ones it reads hold. Walkers find them without building anything, one
// per stretch of the stream, all at once: a stretch starts at a frame
// (FramesNear: protocol 4 and later frame the stream, and the pickler
// starts a frame only between opcodes), and its walker finds the stretch's
// first batch (Walk), where a tail can start, then walks on to the
// stretch's end. The first stretch's walker keeps the memo: it hands the
// strings and numbers it memoizes to its sink and records memoized
// containers as KindForeign values, which the head's memo resolves when
// the caller merges (with one tail the head decodes that stretch itself,
// and its memo there stands for the walk: Prefix). The other walkers only
// count their entries (Counting), storing nothing, and note where each
// frame starts and how many entries came before it (Marks). A tail
// then starts from the first stretch's memo with its base (Fork): the ids
// between are the counted stretches', which it reads one by one through a
// function the caller gives, that walks the frame holding one again. Tails
// read almost none of them: their keys, actions and frames are mostly the
// first stretch's, and their own entries they number from their base.
//
// Anything a walker does not expect (protocol 0 text opcodes, explicit
// memo ids in a stretch, a memo entry that copies another, opcodes the
// decoder refuses) ends it with ErrNoSplit, and a tail that meets anything
// it cannot decode fails: the head then decodes that part itself.
// Splitting never changes a result; it only saves time.

// ErrNoSplit says a stream has no point where a tail can start.
var ErrNoSplit = errors.New("no point to split the stream at")

// tail is the state of a decoder that decodes the tail of a split stream.
type tail struct {
	start int64  // offset of the first batch's MARK
	base  uint64 // the memo's length there: lower ids are the head's
	list  Handle // the list the batches go to (the head's, opened in the tail's sink)
	end   int64  // where the head resumes, once DecodeTail returned
	// ends, if not nil, says whether the tail ends at the batch at an
	// offset: where the next tail starts.
	ends func(off int64) bool
}

// Walk walks the stream of d, a decoder that only walks, from where it
// stopped (the start, the first time) to the next batch of appends that
// starts at or after offset from, and returns that batch's
// offset; Fork then starts a tail there. Strings and numbers the walk
// memoizes go to d's sink; nothing else is built. At the end of the
// stream it returns ErrNoSplit, and AtEnd is then true.
func (d *Decoder) Walk(from int64) (int64, error) {
	if d.walk == nil {
		if d.Offset() != 0 || d.part != nil {
			return 0, errors.New("a walk must start a new decoder")
		}
		d.walk = &walk{last: -1}
	}
	return d.scan(from)
}

// Stretch makes d, a new decoder of the bytes of a stream from off on, the
// walker of the stretch that starts there and ends where d's input does:
// Walk then numbers its memo entries from 0. off must start an opcode that
// needs none before it, as a frame's start does; proto is the stream's
// protocol.
func (d *Decoder) Stretch(off int64, proto int) {
	d.base, d.proto = off, proto
	d.walk = &walk{last: -1, stretch: true, blind: true}
}

// Counting makes d, the walker of a stretch (Stretch) that has not walked
// yet, count its memo entries instead of keeping them: Memoized says how
// many it walked, and Marks where it can walk them again. It stops where
// a walk that keeps them would.
func (d *Decoder) Counting() {
	if w := d.walk; w != nil && w.stretch && d.pos == 0 && w.last < 0 {
		w.count, w.marks = true, []Mark{{Off: d.base}}
	}
}

// Mark is where a counting walk passed a frame's start, and how many
// entries it had counted before it: a walker of the stretch from Off
// (Stretch) numbers from 0 the entries N, N+1, ... of the counted
// stretch.
type Mark struct {
	Off int64
	N   uint64
}

// Marks returns the frames' starts d, a counting walker, passed, the
// stretch's start first, and last where it stands with its count: the
// entries before each mark's successor lie between the two.
func (d *Decoder) Marks() []Mark {
	if d.walk == nil || !d.walk.count {
		return nil
	}
	ms := d.walk.marks
	return append(ms[:len(ms):len(ms)], Mark{Off: d.Offset(), N: d.memo.n})
}

// Prefix returns, for the tails' Fork, the walker of the first stretch of
// a split stream when d, the head, decoded it: from the start to where d
// stands.
// With one tail the head decodes the start of its part while a single
// walker walks the rest (snapshot's decodeSplit), so d's memo stands for
// that stretch's walk. The walker holds a copy, since d's later decoding
// rewrites a container's entries as it closes, with each container a
// placeholder of its id, as a walk stores one. It shares d's budget.
func (d *Decoder) Prefix() (*Decoder, error) {
	m := &d.memo
	if d.walk != nil || d.part != nil || m.sparse != nil || len(m.tails) > 0 {
		return nil, ErrNoSplit
	}
	w := &Decoder{lim: d.lim, proto: d.proto, shared: d.shared, stop: -1, walk: &walk{last: -1}}
	w.memo = memo{n: m.n, wide: slices.Clone(m.wide)}
	for lo := uint64(0); lo < m.n; lo += memoChunkLen {
		us := m.chunks[lo>>memoChunkBits][:min(memoChunkLen, m.n-lo)]
		c := make([]uint32, len(us))
		for i, u := range us {
			if m.container(u) {
				u = placeholder(lo + uint64(i))
			}
			c[i] = u
		}
		w.memo.chunks = append(w.memo.chunks, c)
		w.memo.chunkBytes += 4 * int64(len(c))
	}
	if w.shared != nil {
		w.shared.report(w, w.memo.bytes())
	}
	return w, nil
}

// container reports whether the packed entry u holds a container: an open
// one, or a value of the sink's.
func (m *memo) container(u uint32) bool {
	pk := u >> payloadBits
	if pk == packedWide {
		k := m.wide[u&payloadMask].Kind
		return k == KindRef || k >= KindUser
	}
	return pk == uint32(KindRef) || pk >= packedUser
}

// Counted is a stretch a counting walk walked (Counting): the id its
// first entry has in the stream, and the walk's marks.
type Counted struct {
	First uint64
	Marks []Mark
}

// Frame returns the bytes from..to between the marks around entry id of
// c, where Reread walks: a frame, in a stream framed as CPython frames.
func (c Counted) Frame(id uint64) (from, to int64, ok bool) {
	i, ok := c.frame(id)
	if !ok {
		return 0, 0, false
	}
	return c.Marks[i].Off, c.Marks[i+1].Off, true
}

// frame is the index of the last mark at or before entry id of c, which
// ok says c holds.
func (c Counted) frame(id uint64) (int, bool) {
	if id < c.First {
		return 0, false
	}
	i := sort.Search(len(c.Marks), func(i int) bool { return c.Marks[i].N > id-c.First }) - 1
	return i, i >= 0 && i+1 < len(c.Marks)
}

// Reread returns entry id of c, which c must hold, as the walk of the
// frame holding it (Frame) stores it, its placeholder at its id in the
// stream: walker(from, to) is the walker (Stretch) of the bytes from..to,
// whose sink's numbers its strings are. ok is false where that walk stops
// before the entry, as a walk of the whole stretch would have. The walker
// leaves its budget when done.
func (c Counted) Reread(id uint64, walker func(from, to int64) *Decoder) (Value, bool) {
	i, ok := c.frame(id)
	if !ok {
		return Value{}, false
	}
	d := walker(c.Marks[i].Off, c.Marks[i+1].Off)
	defer d.LeaveBudget()
	d.Walk(math.MaxInt64) // ErrNoSplit at the end, or where it stops
	v, ok := d.MemoValue(id - c.First - c.Marks[i].N)
	if v.Kind == KindForeign {
		v.N = id
	}
	return v, ok
}

// AtEnd reports whether d has read its whole input.
func (d *Decoder) AtEnd() bool { return d.eof && d.pos == d.end }

// Memoized is how many entries d's memo holds.
func (d *Decoder) Memoized() uint64 { return d.memo.len() }

// Fork makes t, a new decoder of the stream from off on, the decoder of
// the tail that starts there, at a batch a walk stopped at, where n
// entries were memoized: the entries of d's memo (a walker's, which holds
// n or fewer), and ids from d's length to n, which read gives (Marks). t's
// sink must intern strings as d's sink did: the memo they share holds its
// strings, and read's strings must be t's sink's values. d's memo is
// shared, not copied.
func (d *Decoder) Fork(t *Decoder, off int64, n uint64, read func(id uint64) (Value, bool)) error {
	switch {
	case d.memo.sparse != nil || n < d.memo.n || n > d.memo.n && read == nil:
		return errors.New("fork: not a walk's memo up to the tail")
	case n > payloadMask:
		return ErrNoSplit // a placeholder's id would not pack
	}
	t.base, t.proto, t.shared = off, d.proto, d.shared
	t.memo = d.memo.forkLazy(n, read)
	t.part = &tail{start: off, base: n}
	return nil
}

// TailStart is the offset where the tail starts: the head decodes up to it.
func (d *Decoder) TailStart() int64 { return d.part.start }

// scan walks opcodes until a MARK at or after offset from, and after the
// MARK it last stopped at, that directly follows
// an APPENDS: the list that APPENDS filled is then on top of the stack,
// between two batches (the tail's own decoding and the caller's merge
// check the rest). On the way it keeps the memo: the pickler memoizes an
// object right after writing it, so MEMOIZE stores the string or number the
// previous opcode pushed, a copy of what a memo read pushed, or else a
// KindForeign placeholder. It builds nothing and tracks no stack, which
// makes it several times cheaper per opcode than decoding.
func (d *Decoder) scan(from int64) (int64, error) {
	w := d.walk
	w.done = false
	from = max(from, w.last+1)
	defer func() {
		if w.done {
			w.last = d.Offset()
		}
	}()
	for {
		if d.end-d.pos < 16 && !d.eof {
			if err := d.fill(len(d.buf)); err != nil {
				return 0, err
			}
		}
		if d.pos == d.end {
			return 0, ErrNoSplit
		}
		if err := d.scanFast(w, from); err != nil || w.done {
			return d.Offset(), err
		}
		if d.pos == d.end {
			continue
		}
		if err := d.scanStep(w, from); err != nil || w.done {
			return d.Offset(), err
		}
	}
}

// walk is scan's state between opcodes.
type walk struct {
	top   Value // what the last opcode pushed, if topIs says so
	topIs uint8
	prev  byte  // the last opcode but FRAME and memo stores
	done  bool  // stopped at the split point
	last  int64 // the split point it last stopped at, or -1
	// stretch is set in the walker of a stretch (Stretch): its memo ids
	// are numbered from the stretch's start, not the stream's, so it
	// cannot follow a memo read; blind until it has walked an opcode whose
	// value a MEMOIZE could store.
	stretch, blind bool
	// entries counts the dicts walkEntry walked; byOpcode, set by tests,
	// walks every dict opcode by opcode instead.
	entries  int
	byOpcode bool
	// str is the last short string walkEntry had its sink intern, where
	// the sink is a RecordSink, whose String interns: the next entry's
	// equal one gets its value without String (torch's "N/A"). Its gen
	// is 1 once set: what a walk's sink interned stays so.
	str keptString
	// count is set in a counting walk (Counting), which keeps marks, the
	// frames' starts it passed.
	count bool
	marks []Mark
}

const (
	topOther  = iota // a container, or nothing the walk follows
	topScalar        // top holds the value
	topMemo          // top.N is the memo id the value was read from
)

// memoize stores the walk's top under id, which must be the next one: the
// tails share what the walk stored.
func (d *Decoder) memoize(w *walk, id uint64) error {
	if id != d.memo.n || d.memo.sparse != nil || w.blind || w.stretch && w.topIs == topMemo {
		return ErrNoSplit
	}
	if w.count {
		d.memo.n++
		return nil
	}
	v := Value{Kind: KindForeign, N: id}
	switch w.topIs {
	case topScalar:
		v = w.top
	case topMemo:
		var ok bool
		if v, ok = d.memo.get(w.top.N); !ok {
			return ErrNoSplit // a read of an id never stored: the head reports it
		}
	}
	return d.memo.put(id, v)
}

// scanFast walks the buffered opcodes that need no refill, stopping at any
// other. Most opcodes only need their length: the value MEMOIZE stores is
// decoded then, from the opcode before it, so the loop is mostly a compare
// or a table lookup per opcode. A counting walk (Counting) stores nothing
// but counts, and notes each frame's start with the count there: taking
// trace entries a dict at once too, BenchmarkCount counts the bench seed
// at 4.0 GB/s where BenchmarkWalk walks it at 3.0 (3.5 opcode by opcode).
func (d *Decoder) scanFast(w *walk, from int64) error {
	buf, pos := d.buf[:d.end], d.pos
	limit, stopAt := d.end-16, int(max(from-d.base, 0))
	last := -1 // position of the last opcode but FRAME and MEMOIZE; -1: w's
	m := &d.memo
	count := w.count
	var err error
loop:
	for pos <= limit {
		// The commonest opcodes (memo reads: most keys and frames) get
		// their length from compares, not from the table: the next
		// position then hangs on a predicted branch instead of two loads
		// in a row, and the core runs ahead. BenchmarkWalk on the 2-core
		// dev VM: 1.05-1.19 GB/s with the table alone, 1.21-1.52 with
		// these (bench/RESULTS.md).
		op := buf[pos]
		if op == opLongBinGet {
			last, pos = pos, pos+5
			continue
		}
		if op == opBinGet || op == opBinInt1 {
			last, pos = pos, pos+2
			continue
		}
		n := int(scanLen[op])
		if n < scanMark { // most opcodes: only their length matters
			if n == scanStop {
				break
			}
			if op == opEmptyDict && !w.byOpcode {
				if at, ok := d.walkEntry(buf, pos, limit); ok {
					last, pos = at, at+1
					w.entries++
					continue
				}
			}
			last, pos = pos, pos+n
			continue
		}
		switch n {
		case scanMark:
			prev := w.prev
			if last >= 0 {
				prev = buf[last]
			}
			if pos >= stopAt && prev == opAppends {
				w.done = true
				break loop
			}
			last = pos
			pos++
		case scanShort:
			n = 2 + int(buf[pos+1])
			if pos+n >= len(buf) {
				break loop // not buffered whole
			}
			last, pos = pos, pos+n
		case scanFrame:
			if count {
				w.marks = append(w.marks, Mark{Off: d.base + int64(pos), N: m.n})
			}
			pos += 9
		case scanMemoize:
			if count && last >= 0 {
				// A count refuses what a walk would store as a copy of a
				// memo read, an entry this stretch cannot number.
				if op := buf[last]; op == opBinGet || op == opLongBinGet {
					err = ErrNoSplit
					break loop
				}
				m.n++
				pos++
				break
			}
			// scanStep stores it from the walk's top when the opcode before
			// is not in this buffer, the value does not pack, or the chunk
			// is full (a count has none).
			c := m.n >> memoChunkBits
			if last < 0 || m.sparse != nil || m.n > payloadMask || c >= uint64(len(m.chunks)) || len(m.chunks[c]) == cap(m.chunks[c]) {
				break loop
			}
			u, ok, e := d.packedAt(buf, last, m.n)
			if e != nil || !ok {
				err = e
				break loop
			}
			m.chunks[c] = append(m.chunks[c], u)
			m.n++
			pos++
		}
	}
	if last >= 0 && err == nil {
		// The bytes before pos may be gone after a refill: keep the top.
		w.prev, w.blind = buf[last], false
		w.top, w.topIs, err = d.valueAt(buf, last)
	}
	d.pos = pos
	return err
}

// walkEntry walks the dict whose EMPTY_DICT is at buf[pos] at once, where
// scanFast would take its opcodes one at a time, if it is written as a
// trace entry is: memoized, one batch of items, keys that are memo reads,
// and values that are ints, memo reads, short strings or a list of memo
// reads, with no opcode past limit. It stores the memo entries the dict
// makes, as scanFast would: its placeholder, then its strings and list in
// the order of their MEMOIZEs. It returns the position of the dict's
// SETITEMS; with ok false it stored nothing.
func (d *Decoder) walkEntry(buf []byte, pos, limit int) (setItems int, ok bool) {
	m := &d.memo
	if pos+2 > limit || buf[pos+1] != opMemoize || buf[pos+2] != opMark {
		return 0, false
	}
	var puts [maxEntryPuts]uint32
	puts[0] = placeholder(m.n)
	nputs := 1
	count := d.walk.count // a counting walk keeps no entry: it counts them
	for p := pos + 3; p <= limit; {
		if buf[p] == opSetItems {
			if count {
				m.n += uint64(nputs)
				return p, true
			}
			// The entries go in the current chunk, as entry's do (the
			// first chunk may have more room than its ids).
			c := m.n >> memoChunkBits
			if m.sparse != nil || m.n+uint64(nputs) > payloadMask || c >= uint64(len(m.chunks)) ||
				cap(m.chunks[c])-len(m.chunks[c]) < nputs || int(m.n&(memoChunkLen-1))+nputs > memoChunkLen {
				return 0, false
			}
			m.chunks[c] = append(m.chunks[c], puts[:nputs]...)
			m.n += uint64(nputs)
			return p, true
		}
		// The key, a memo read: its length by compares, not by memoID,
		// whose id, read and dropped, cost BenchmarkWalk 8%.
		switch buf[p] {
		case opLongBinGet:
			p += 5
		case opBinGet:
			p += 2
		default:
			return 0, false
		}
		if p > limit {
			return 0, false
		}
		switch buf[p] { // the value
		case opLongBinGet, opBinInt:
			p += 5
		case opBinGet, opBinInt1:
			p += 2
		case opBinInt2:
			p += 3
		case opLong1:
			p += 2 + int(buf[p+1])
		case opShortBinUnicode:
			n := int(buf[p+1])
			if p+2+n > limit {
				return 0, false
			}
			at := p
			p += 2 + n
			if buf[p] == opMemoize {
				if nputs == len(puts) {
					return 0, false
				}
				if !count {
					k, keep := &d.walk.str, d.records != nil
					v, ok := k.get(buf[at+2:], n, 1, keep)
					if !ok {
						if v, ok = d.internString(k, buf[at+2:], n, 1, keep); !ok {
							return 0, false // scanFast reports it
						}
					}
					u, ok := packNarrow(v)
					if !ok {
						return 0, false
					}
					puts[nputs] = u
				}
				nputs++
				p++
			}
		case opEmptyList:
			p++
			if p <= limit && buf[p] == opMemoize {
				if nputs == len(puts) {
					return 0, false
				}
				puts[nputs] = placeholder(m.n + uint64(nputs))
				nputs++
				p++
			}
			if p <= limit && buf[p] == opMark {
				p = skipMemoReads(buf, p+1, limit)
				if p > limit || buf[p] != opAppends {
					return 0, false
				}
				p++
			}
		default:
			return 0, false
		}
	}
	return 0, false
}

// packedAt returns what MEMOIZE stores as memo id after the opcode at
// buf[at]: its value packed, or a KindForeign placeholder for a container.
// ok is false for a value that does not pack (scanStep stores it).
func (d *Decoder) packedAt(buf []byte, at int, id uint64) (uint32, bool, error) {
	v, is, err := d.valueAt(buf, at)
	switch {
	case err != nil:
		return 0, false, err
	case is == topOther:
		return placeholder(id), true, nil
	case is == topMemo:
		if v.N >= d.memo.n || d.walk.stretch {
			return 0, false, ErrNoSplit // a read of an id never stored: the head reports it
		}
		return *d.memo.slot(v.N), true, nil
	}
	u, ok := packNarrow(v)
	return u, ok, nil
}

// valueAt decodes the value the opcode at buf[at] pushes if it is a number,
// a short str (which the sink interns) or a memo read.
func (d *Decoder) valueAt(buf []byte, at int) (Value, uint8, error) {
	switch buf[at] {
	case opBinGet:
		return Value{N: uint64(buf[at+1])}, topMemo, nil
	case opLongBinGet:
		return Value{N: uint64(binary.LittleEndian.Uint32(buf[at+1:]))}, topMemo, nil
	case opBinInt1:
		return Value{Kind: KindInt, N: uint64(buf[at+1])}, topScalar, nil
	case opBinInt2:
		return Value{Kind: KindInt, N: uint64(binary.LittleEndian.Uint16(buf[at+1:]))}, topScalar, nil
	case opBinInt:
		return Value{Kind: KindInt, N: uint64(int64(int32(binary.LittleEndian.Uint32(buf[at+1:]))))}, topScalar, nil
	case opLong1:
		if k := int(buf[at+1]); k <= 8 {
			if v, err := decodeLong(buf[at+2 : at+2+k]); err == nil {
				return v, topScalar, nil
			}
		}
	case opShortBinUnicode:
		v, err := d.sink.String(buf[at+2:at+2+int(buf[at+1])], false)
		if err != nil {
			return Value{}, topOther, &Error{Offset: d.base + int64(at), Op: opShortBinUnicode, Err: err}
		}
		return v, topScalar, nil
	}
	return Value{}, topOther, nil
}

// scanLen is the length of each opcode scanFast steps over, or what else
// it does with it.
const (
	scanStop    = 0   // scanStep walks it
	scanMark    = 250 // a split point if it follows an APPENDS
	scanShort   = 252 // a one-byte length, then that many bytes
	scanFrame   = 253 // FRAME: no opcode of the data
	scanMemoize = 254
)

var scanLen = func() (t [256]uint8) {
	for _, op := range []byte{opEmptyDict, opEmptyList, opEmptyTuple, opSetItems, opAppends, opSetItem,
		opAppend, opTuple1, opTuple2, opTuple3, opTuple, opDict, opList, opPop, opPopMark, opDup,
		opNone, opNewTrue, opNewFalse} {
		t[op] = 1
	}
	t[opBinGet], t[opBinInt1] = 2, 2
	t[opBinInt2] = 3
	t[opLongBinGet], t[opBinInt] = 5, 5
	t[opBinFloat] = 9
	t[opMark], t[opFrame], t[opMemoize] = scanMark, scanFrame, scanMemoize
	t[opShortBinUnicode], t[opShortBinString], t[opShortBinBytes], t[opLong1] = scanShort, scanShort, scanShort, scanShort
	return t
}()

// scanStep walks one opcode scanFast left: near the end of the buffer, or
// rare.
func (d *Decoder) scanStep(w *walk, from int64) error {
	op := d.buf[d.pos]
	if op == opMark && w.prev == opAppends && d.Offset() >= from {
		w.done = true
		return nil
	}
	d.pos++
	switch op {
	case opFrame:
		if w.count {
			w.marks = append(w.marks, Mark{Off: d.Offset() - 1, N: d.memo.n})
		}
		if err := d.need(8); err != nil {
			return err
		}
		d.pos += 8
		return nil
	case opProto:
		if err := d.need(1); err != nil {
			return err
		}
		d.pos++
	case opMemoize, opBinPut, opLongBinPut:
		if op != opMemoize && w.stretch {
			return ErrNoSplit // an explicit id: numbered from the stream's start
		}
		id := d.memo.len()
		switch op {
		case opBinPut:
			if err := d.need(1); err != nil {
				return err
			}
			id = uint64(d.buf[d.pos])
			d.pos++
		case opLongBinPut:
			if err := d.need(4); err != nil {
				return err
			}
			id = uint64(binary.LittleEndian.Uint32(d.buf[d.pos:]))
			d.pos += 4
		}
		return d.memoize(w, id) // the top stays, and so does prev
	case opBinGet, opLongBinGet:
		var id uint64
		if op == opBinGet {
			if err := d.need(1); err != nil {
				return err
			}
			id = uint64(d.buf[d.pos])
			d.pos++
		} else {
			if err := d.need(4); err != nil {
				return err
			}
			id = uint64(binary.LittleEndian.Uint32(d.buf[d.pos:]))
			d.pos += 4
		}
		if id >= d.memo.n && !w.stretch {
			return ErrNoSplit
		}
		w.top, w.topIs = Value{N: id}, topMemo
	case opBinInt1, opBinInt2, opBinInt, opLong1, opBinFloat, opNone, opNewTrue, opNewFalse,
		opShortBinUnicode, opShortBinString, opShortBinBytes, opBinUnicode, opBinString,
		opBinBytes, opBinUnicode8, opBinBytes8, opLong4:
		v, err := d.scalar(op)
		if err != nil {
			return err
		}
		w.top, w.topIs = v, topScalar
	case opMark, opEmptyDict, opEmptyList, opEmptyTuple, opSetItems, opAppends, opSetItem, opAppend,
		opTuple1, opTuple2, opTuple3, opTuple, opDict, opList, opPop, opPopMark, opDup:
		w.topIs = topOther
	default: // STOP, protocol 0 text opcodes, refused and unknown ones
		return ErrNoSplit
	}
	w.prev, w.blind = op, false
	return nil
}

// scalar decodes the argument of a scalar opcode (already consumed) the way
// step does, without pushing it; a string becomes the sink's value only if
// the next opcode memoizes it.
func (d *Decoder) scalar(op byte) (Value, error) {
	switch op {
	case opNone:
		return Value{Kind: KindNone}, nil
	case opNewTrue:
		return Value{Kind: KindBool, N: 1}, nil
	case opNewFalse:
		return Value{Kind: KindBool}, nil
	}
	mark := len(d.stack)
	sink := d.sink
	d.sink = scanSink{d, sink}
	_, _, err := d.step(op)
	d.sink = sink
	if err != nil {
		return Value{}, err
	}
	v := d.stack[mark]
	d.stack = d.stack[:mark]
	return v, nil
}

// scanSink is the walk's sink: strings pass to the real sink only when the
// next opcode memoizes them. It never sees a container.
type scanSink struct {
	d    *Decoder
	real Sink
}

func (s scanSink) String(b []byte, isBytes bool) (Value, error) {
	d := s.d
	if d.pos < d.end {
		switch d.buf[d.pos] {
		case opMemoize, opBinPut, opLongBinPut:
			return s.real.String(b, isBytes)
		}
		return Value{Kind: KindNone}, nil // never read: the walk takes no unmemoized value
	}
	return s.real.String(b, isBytes) // the next opcode is not buffered: keep it
}

var errScanContainer = errors.New("scan: a container opcode reached the scalar decoder")

func (scanSink) Open(Handle, Container) error   { return errScanContainer }
func (scanSink) SetItems(Handle, []Value) error { return errScanContainer }
func (scanSink) Append(Handle, []Value) error   { return errScanContainer }
func (scanSink) Close(Handle) (Value, error)    { return Value{}, errScanContainer }
func (scanSink) Tuple([]Value) (Value, error)   { return Value{}, errScanContainer }

// DecodeTail opens the list the batches go to in the sink, decodes whole
// batches into it until the stream leaves the list or ends, if not nil,
// says the tail ends at a batch, and returns the list's handle and the
// offset where the head goes on.
func (d *Decoder) DecodeTail(ends func(off int64) bool) (Handle, int64, error) {
	d.part.ends = ends
	h, err := d.newHandle(List)
	if err != nil {
		return 0, 0, err
	}
	d.part.list = h
	if err := d.push(Value{Kind: KindRef, N: uint64(h)}); err != nil {
		return 0, 0, err
	}
	if _, done, err := d.run(); err != nil {
		return 0, 0, err
	} else if done {
		return 0, 0, errors.New("the stream ended inside a split list")
	}
	d.part.end = d.Offset()
	d.settle()
	return h, d.part.end, nil
}

// settle lets go of what a finished tail holds and the head will not use
// until the caller splices it, which is after every tail before it: its
// read buffer and its memo's last chunk's room. At the peak of a 16-part
// decode of the 288 MB bench file the 15 tails' buffers held 3.75 MiB
// and their memos' last chunks some 7 MiB unused (bench/RESULTS.md).
func (d *Decoder) settle() {
	if d.src == nil {
		d.base += int64(d.pos)
		d.buf, d.pos, d.end = nil, 0, 0
	}
	d.memo.trim()
}

// tailEnds is called between batches (only the list on the stack): the
// tail goes on with a MARK or FRAME and ends at anything else, or where
// the next tail starts.
func (d *Decoder) tailEnds() (bool, error) {
	if d.part.ends != nil && d.part.ends(d.Offset()) {
		return true, nil
	}
	if err := d.need(1); err != nil {
		return false, err
	}
	switch d.buf[d.pos] {
	case opMark, opFrame:
		return false, nil
	}
	return true, nil
}

// Top returns the container on top of the stack, which must be open.
func (d *Decoder) Top() (Handle, bool) {
	if len(d.stack) == 0 || len(d.marks) > 0 && d.marks[len(d.marks)-1] == len(d.stack) {
		return 0, false
	}
	v := d.stack[len(d.stack)-1]
	if v.Kind != KindRef || d.handles[v.N].closed {
		return 0, false
	}
	return Handle(v.N), true
}

// MemoValue returns memo entry id as it is now.
func (d *Decoder) MemoValue(id uint64) (Value, bool) { return d.memo.get(id) }

// TailMemo reports whether ok accepts the kind of every memo entry the
// tail made, and lists the ids that its KindForeign entries hold: the
// head's entries the tail copied. The caller checks them before it
// changes anything, since Splice must not fail halfway. It reads the
// entries as they are packed, asking ok once per kind: unpacking each of
// the 38 M entries the tails of the 996 MB bench file make and passing it
// to ok took 0.3 s of CPU time per decode on 16 cores. A chunk's entries
// are first only gathered into the set of their kinds, and read one by one
// only if a wide or a KindForeign one is among them: checking each took a
// 2-part decode of that file 28 ms on the tail's core at its end, where
// the head waits for it.
func (d *Decoder) TailMemo(ok func(Kind) bool) (foreign []uint64, all bool) {
	m := &d.memo
	if m.sparse != nil {
		return nil, false
	}
	var verdict [packedWide]int8 // by packed kind: 1 accepted, -1 not, 0 not asked
	accepted := func(pk uint32) bool {
		if verdict[pk] == 0 {
			verdict[pk] = -1
			if ok(unpackedKind[pk]) {
				verdict[pk] = 1
			}
		}
		return verdict[pk] > 0
	}
	const oneByOne = 1<<packedWide | 1<<uint32(KindForeign)
	for id := d.part.base; id < m.n; {
		run := m.chunks[id>>memoChunkBits][id&(memoChunkLen-1):]
		run = run[:min(uint64(len(run)), m.n-id)]
		if len(run) == 0 {
			return nil, false // ids not in their chunk: no memo a decoder makes
		}
		id += uint64(len(run))
		var kinds uint32 // the packed kinds in run, a bit each
		for _, u := range run {
			kinds |= 1 << (u >> payloadBits)
		}
		if kinds&oneByOne == 0 {
			for pk := range uint32(packedWide) {
				if kinds>>pk&1 != 0 && !accepted(pk) {
					return nil, false
				}
			}
			continue
		}
		for _, u := range run {
			pk := u >> payloadBits
			if pk == packedWide {
				v := m.wide[u&payloadMask]
				if !ok(v.Kind) {
					return nil, false
				}
				if v.Kind == KindForeign {
					foreign = append(foreign, v.N)
				}
				continue
			}
			if !accepted(pk) {
				return nil, false
			}
			if pk == uint32(KindForeign) {
				foreign = append(foreign, uint64(u&payloadMask))
			}
		}
	}
	return foreign, true
}

// Splice takes over the work of tail t, which started where d stopped
// (DecodeTo(t.TailStart())) and whose records the caller has merged into
// d's sink: it adopts the memo entries t made, which tr maps into d's
// sink's values when d reads them (TailMemo has checked them; tr must stay
// valid while d runs), and goes on reading r, positioned at t's end (a
// decoder over bytes goes on in its own and ignores r). The
// memo's chunks are taken over, not copied: the tail's chunk that holds the
// split gets the head's entries below it.
func (d *Decoder) Splice(t *Decoder, tr func(Value) Value, r io.Reader) error {
	p := t.part
	if p == nil || p.end == 0 || d.Offset() != p.start || d.memo.len() != p.base ||
		d.memo.sparse != nil || t.memo.sparse != nil || d.part != nil {
		return errors.New("splice: the tail does not continue this decoder")
	}
	if c, k := p.base>>memoChunkBits, p.base&(memoChunkLen-1); k > 0 {
		copy(t.memo.chunks[c][:k], d.memo.chunks[c][:k])
	}
	if t.memo.n > p.base {
		d.memo.chunks = append(d.memo.chunks[:p.base>>memoChunkBits], t.memo.chunks[p.base>>memoChunkBits:]...)
		d.memo.n = t.memo.n
		d.memo.tails = append(d.memo.tails, &tailMemo{lo: p.base, hi: t.memo.n, wide: t.memo.wide, tr: tr})
	}
	d.memo.countChunks()
	t.memo = memo{}
	t.LeaveBudget()
	d.base, d.pos, d.end, d.eof = p.end, 0, 0, false
	if d.src == nil {
		d.r = r
	} else {
		d.buf = d.buf[:0]
	}
	return nil
}

// FramesNear returns the stream's protocol and, for each offset of at, the
// start of a frame at or after it, or -1 where it finds none: where
// stretches can start (Stretch). It looks near each offset at once, on a
// goroutine each, where hopping from frame header to frame header from
// the stream's start took a read of 9 bytes a frame, one after the other
// (16-18 ms for 16 offsets of the 996 MB bench file on the dev VM, before
// any walker started). It takes the first FRAME opcode in the frameWindow
// bytes from the offset whose length leads to another frameChain times
// over, or to the stream's end. A FRAME byte and a length that only look
// so, inside an opcode's bytes, are unlikely to chain; where they do, the
// stretch before ends inside an opcode, its walk is not whole, and the
// stretches after it are not joined (snapshot's startTails): such a start
// can cost a split, never change a result. A stream before protocol 4 has
// no frames, and gets none.
func FramesNear(r io.ReaderAt, size int64, at []int64) (int, []int64, error) {
	var hdr [2]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return 0, nil, err
	}
	if hdr[0] != opProto || hdr[1] < 4 {
		return 0, nil, nil
	}
	starts := make([]int64, len(at))
	errs := make([]error, len(at))
	var wg sync.WaitGroup
	for k, off := range at {
		wg.Go(func() { starts[k], errs[k] = frameNear(r, size, max(off, 2)) })
	}
	wg.Wait()
	return int(hdr[1]), starts, errors.Join(errs...)
}

// How FramesNear finds a frame: within frameWindow bytes of an offset
// (CPython's frames hold 64 KiB and an opcode, so two start in any 256
// KiB of a framed stream), chained to frameChain more frames of at most
// maxFrameLen bytes each, trying at most frameProbes candidates that need
// a read of their own (a hostile file's window of FRAME bytes costs that
// many reads, not one per byte).
const (
	frameWindow = 256 << 10
	frameChain  = 2
	maxFrameLen = 1 << 20
	frameProbes = 64
)

// frameNear is FramesNear's search from offset from.
func frameNear(r io.ReaderAt, size, from int64) (int64, error) {
	if from >= size {
		return -1, nil
	}
	win := make([]byte, min(frameWindow, size-from))
	n, err := r.ReadAt(win, from)
	if err != nil && err != io.EOF {
		return -1, err
	}
	win = win[:n]
	probes := 0
	for p := 0; p < len(win); p++ {
		q := bytes.IndexByte(win[p:], opFrame)
		if q < 0 {
			break
		}
		p += q
		ok, err := frameChains(r, size, from, win, from+int64(p), &probes)
		if err != nil || ok {
			return from + int64(p), err
		}
		if probes >= frameProbes {
			break
		}
	}
	return -1, nil
}

// frameChains reports whether the FRAME opcode at offset off is followed,
// through the lengths, by frameChain more or by the stream's end. The
// headers inside win (the bytes from offset from) are read there, the
// others through r, each counted in probes.
func frameChains(r io.ReaderAt, size, from int64, win []byte, off int64, probes *int) (bool, error) {
	var hdr [9]byte
	for i := 0; i <= frameChain; i++ {
		if i > 0 && off == size {
			return true, nil
		}
		if off+9 > size {
			return false, nil
		}
		if w := off - from; w+9 <= int64(len(win)) {
			copy(hdr[:], win[w:])
		} else {
			*probes++
			if _, err := r.ReadAt(hdr[:], off); err != nil {
				return false, err
			}
		}
		n := binary.LittleEndian.Uint64(hdr[1:])
		if hdr[0] != opFrame || n == 0 || n > maxFrameLen || n > uint64(size-off-9) {
			return false, nil
		}
		off += 9 + int64(n)
	}
	return true, nil
}
