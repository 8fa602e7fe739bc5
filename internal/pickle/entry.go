package pickle

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
)

// Dicts that look like the last one.
//
// A memory snapshot's trace is millions of dicts written alike: the same
// keys, each a memo read of the same id (BINGET or LONG_BINGET), in the
// same order, and values that are ints, memo reads, a fresh string (torch
// writes "N/A" anew in every entry) and the frames list, a memo read or a
// fresh list of memo reads. (Its annotations are dicts alike too, but for
// two keys that torch writes anew in each, short strings memoized there.)
// fast() runs such a dict at 20-odd opcodes, each dispatched, pushed and
// popped. entry instead reads it in one pass:
// the keys are compared with the last such dict's (its template) as bytes,
// the values are read in place, and the sink gets the whole dict, by
// Record if it compiled the template (RecordSink); the memo gets the same
// entries, in the same order, as fast() would write.
//
// Nothing is written before the whole dict has been read: where anything
// differs (another key, a value of another kind, a FRAME header, a memo
// read of an id fast() would not read), entry reads it again as a new
// template, and failing that leaves the dict to fast(). The template lives
// for one fast() call: no memo entry it names can change meanwhile (fast()
// only adds entries), where step could rewrite one (BINPUT).
//
// A trace's events have few stacks: most entries' frames lists repeat an
// earlier entry's memo reads byte for byte. Where the sink says a list's
// value stands for any list of the same items (RecordSink.Reusable), entry
// keeps it by those bytes, and a later entry whose list has the same
// bytes gets that value without its items being read or the list built.
// Like the template, a kept list lives for one fast() call.

// RecordSink is a WholeSink that builds the dicts entry reads by template
// without looking their keys up for each: Compile is told a template's
// keys once, and Record builds each dict of that template. A trace entry's
// keys cost a lookup each in Dict, and its frames list a container of its
// own in List. Its String interns: equal bytes give equal values, so
// entry gives the short strings of the dicts it builds by Record the value
// an equal string got before.
type RecordSink interface {
	WholeSink
	// Compile reports whether the sink builds the dicts with these keys,
	// in this order, by Record, and under which number.
	Compile(keys []Value) (tmpl int, ok bool)
	// Record builds a dict of template tmpl from kv, its keys and values
	// in Dict's order, where kv[list], if list >= 0, is to be the list of
	// items, which Record builds first. Only the values are set: the keys
	// are the template's, as Compile was told them (storing them again
	// for each dict was 2% of the bench seed's decode). It returns the
	// list's value and the dict's: what List(items) and then Dict(kv)
	// would return, and the error Dict would (a compiled template's List
	// never fails). A list that repeats one whose value was Reusable is
	// not built again: kv holds that value, and list is -1.
	Record(tmpl int, kv []Value, list int, items []Value) (lv, v Value, err error)
	// Reusable reports whether lv, a list's value from Record, is the
	// value of every list of the same items, so that it may stand for
	// them in place of a list Record builds.
	Reusable(lv Value) bool
}

// listSlots is how many frames lists entry keeps, by their bytes' hash,
// and maxKeptList the longest it keeps, in bytes: what it holds stays
// under 256 KiB however long the lists of a hostile file (a list of
// torch's deep stacks is a few hundred bytes).
const (
	listSlots   = 256
	maxKeptList = 1 << 10
)

// keptList is a frames list entry keeps: its memo reads, as bytes, and
// the value the sink gave it, for the fast() call gen.
type keptList struct {
	raw []byte
	lv  Value
	gen uint64
}

var listSeed = maphash.MakeSeed()

// maxEntryKeys is the most keys a dict read by entry may have (torch's
// trace entries have 7 to 9).
const maxEntryKeys = 16

// maxEntryPuts is the most memo entries a dict read by entry may make:
// itself, and five of its keys and values (torch's annotations write two
// keys and two values anew in each dict).
const maxEntryPuts = 6

// entryMisses is how many dicts in a row entry may fail to read before
// fast() stops asking it, until its next call.
const entryMisses = 8

// entryState is entry's template and scratch space.
type entryState struct {
	keys   [maxEntryKeys]entryKey // the template
	nkeys  int
	misses int
	read   int // dicts read, for tests
	shaped int // of them, read by a shape (shape.go)
	// tmpl is the template's number in the sink, if compiled says it
	// builds its dicts by Record.
	tmpl     int
	compiled bool

	// The dict being read: its keys and values, the items of its list
	// value (at kv[list], -1 if none; listMarked: written with MARK and
	// APPENDS, at appends), which of kv go in the memo after the dict
	// itself (-1: the list), and where SETITEMS is.
	kv         [2 * maxEntryKeys]Value
	nkv        int
	list       int
	listMarked bool
	items      []Value
	puts       [maxEntryPuts - 1]int
	nputs      int
	appends    int
	setItems   int
	learned    [maxEntryKeys]entryKey
	learnedLen int

	// view is the memo's view in the fast() call, but for its n, which
	// grows: made once there, not per dict (3-4% of BenchmarkDecode).
	view view

	// The lists kept (see above), valid in the fast() call gen; the
	// dict's list's slot there (-1: the list is not to be kept) and its
	// memo reads, and whether the slot holds it.
	lists   [listSlots]keptList
	gen     uint64
	listAt  int
	listRaw []byte
	listHit bool

	// strs are the short strings read at each place of kv, valid in the
	// fast() call gen, as the lists (entryString).
	strs [2 * maxEntryKeys]keptString

	// shapes are the template's layouts (shape.go): nshapes of them,
	// lastShape the one that matched last, nextShape the one the next
	// learnt replaces; learns counts those learnt in the fast() call.
	// disc is 1 + the offset of the first byte at which two shapes
	// differ (0: none yet), where byDisc names the shape (its slot + 1)
	// that has each byte: the shape to try first.
	shapes                                [shapeSlots]entryShape
	nshapes, lastShape, nextShape, learns int
	disc                                  int
	byDisc                                [256]uint8
}

// forgetShapes drops the template's shapes, as a new template or fast()
// call must.
func (e *entryState) forgetShapes() {
	e.nshapes, e.lastShape, e.nextShape, e.learns = 0, 0, 0, 0
	if e.disc > 0 {
		e.disc, e.byDisc = 0, [256]uint8{}
	}
}

// keptString is a string of at most 8 bytes that internString had the
// sink intern: its bytes as a word, its length, and the value the sink
// gave it, in generation gen (0: none).
type keptString struct {
	word uint64
	n    uint8
	gen  uint64
	v    Value
}

// get is k's value for the string of n bytes at b[0:], if keep (the sink
// is a RecordSink, whose String interns) and k holds that string in
// generation gen. b holds 8 bytes or more whatever n: a decoder reads at
// most to 16 bytes before its buffer's end.
func (k *keptString) get(b []byte, n int, gen uint64, keep bool) (Value, bool) {
	if keep && n <= 8 && k.gen == gen && int(k.n) == n && k.word == shortWord(b, n) {
		return k.v, true
	}
	return Value{}, false
}

// internString is the sink's value for the string of n bytes at b[0:],
// where k.get had none; with keep, one of at most 8 bytes is kept in k for
// generation gen. ok is false where String fails. Interning a string
// twice gives the same value, so a dict that fails after this may still
// be read opcode by opcode.
func (d *Decoder) internString(k *keptString, b []byte, n int, gen uint64, keep bool) (Value, bool) {
	v, err := d.sink.String(b[:n], false)
	if err != nil {
		return Value{}, false
	}
	if keep && n <= 8 {
		*k = keptString{word: shortWord(b, n), n: uint8(n), gen: gen, v: v}
	}
	return v, true
}

// shortWord is the n bytes (at most 8) at b[0:], which holds 8 or more,
// as a word.
func shortWord(b []byte, n int) uint64 { return binary.LittleEndian.Uint64(b) & (1<<(8*n) - 1) }

// entryKey is a key of the template: its opcodes' bytes (len of them,
// little-endian in word, under mask), its value, and whether they memoize
// it (a short string written anew, then MEMOIZE).
type entryKey struct {
	word, mask uint64
	len        uint8
	memo       bool
	v          Value
}

// entry reads the dict whose EMPTY_DICT is at pos, if it is memoized and
// has one batch of items that entry can read (see above), with no opcode
// starting past limit, fast()'s bound. It returns the dict's value and the
// position after its SETITEMS; ok is false if it read nothing.
func (d *Decoder) entry(pos, limit int) (v Value, next int, ok bool, err error) {
	e := &d.ent
	m := &d.memo
	if e.misses >= entryMisses || pos+2 > limit || d.buf[pos+1] != opMemoize || d.buf[pos+2] != opMark ||
		d.whole == nil || m.sparse != nil || len(d.marks)+2 > d.lim.MaxMarks {
		return Value{}, pos, false, nil
	}
	next, ok = 0, false
	shaped := false
	if e.nkeys > 0 {
		if next, shaped = d.readShaped(pos+3, limit); !shaped {
			next, ok = d.readEntry(pos+3, limit, false)
		}
		ok = ok || shaped
	}
	if !ok {
		if next, ok = d.readEntry(pos+3, limit, true); ok {
			e.keys, e.nkeys = e.learned, e.learnedLen
			e.compiled = false
			e.forgetShapes()
			if d.records != nil {
				var keys [maxEntryKeys]Value
				for k, t := range e.keys[:e.nkeys] {
					keys[k] = t.v
				}
				e.tmpl, e.compiled = d.records.Compile(keys[:e.nkeys])
			}
		}
	}
	if !ok {
		e.misses++
		return Value{}, pos, false, nil
	}
	if shaped {
		e.shaped++
	} else if e.compiled {
		d.learnShape(pos + 3)
	}
	e.misses = 0
	e.read++
	// The dict's memo entry and its values' go in the current chunk, or
	// fast() leaves the chunk's growth to step. (The first chunk grows by
	// append, and may have more room than its ids.)
	c, puts := m.n>>memoChunkBits, 1+e.nputs
	if c >= uint64(len(m.chunks)) || cap(m.chunks[c])-len(m.chunks[c]) < puts ||
		int(m.n&(memoChunkLen-1))+puts > memoChunkLen {
		return Value{}, pos, false, nil
	}
	v, err = d.buildEntry()
	return v, next, true, err
}

// readEntry reads the items of a dict from p on: with learn, any keys
// that are memo reads or short strings, noted in e.learned; without, the
// template's. It returns the position after SETITEMS. It is one function,
// with the memo reads inlined, as fast() is: calls per value cost more
// than the reading.
func (d *Decoder) readEntry(p, limit int, learn bool) (int, bool) {
	e := &d.ent
	buf := d.buf
	m := &d.memo
	mv := e.view
	mv.n = m.n
	e.list, e.nputs, e.learnedLen = -1, 0, 0
	e.listAt, e.listHit = -1, false
	nkeys := e.nkeys // a local: kv's stores through e would reload it
	for k := 0; ; k++ {
		// Every opcode read starts at most at limit: 16 bytes past it are
		// buffered, so no argument but a string's needs a bounds check.
		if p > limit {
			return 0, false
		}
		// SETITEMS ends the dict: after the template's keys, or where a
		// learning read finds it. (Looked for after each key, it cost the
		// template's reads 5% of their instructions.)
		if learn && buf[p] == opSetItems || !learn && k == nkeys {
			if buf[p] != opSetItems || !consumed(buf, p+1, d.end, false) {
				return 0, false
			}
			e.setItems, e.nkv = p, 2*k
			return p + 1, true
		}
		if learn {
			if k == maxEntryKeys {
				return 0, false
			}
			start, puts := p, e.nputs
			if buf[p] == opShortBinUnicode {
				// A key written anew, as torch writes an annotation's: its
				// bytes, MEMOIZE included, are the template's, if they fit
				// in a word.
				var ok bool
				if p, ok = d.entryString(p, limit, 2*k, false); !ok || p-start > 8 {
					return 0, false
				}
			} else {
				id, n := memoID(buf[p:])
				u := m.word(id, mv)
				var ok bool
				if e.kv[2*k], ok = readable(u); n == 0 || !ok {
					return 0, false
				}
				p += n
			}
			e.learned[k] = newEntryKey(buf[start:p], e.kv[2*k], e.nputs > puts)
			e.learnedLen++
		} else {
			t := &e.keys[k]
			if binary.LittleEndian.Uint64(buf[p:])&t.mask != t.word {
				return 0, false
			}
			if t.memo && !e.put(2*k) {
				return 0, false
			}
			p += int(t.len)
		}
		if p > limit {
			return 0, false
		}
		at := 2*k + 1
		switch buf[p] {
		case opBinGet, opLongBinGet:
			var ok bool
			if e.kv[at], p, ok = d.memoValue(p, mv); !ok {
				return 0, false
			}
		case opBinInt1:
			e.kv[at] = Value{Kind: KindInt, N: uint64(buf[p+1])}
			p += 2
		case opBinInt2:
			e.kv[at] = Value{Kind: KindInt, N: uint64(binary.LittleEndian.Uint16(buf[p+1:]))}
			p += 3
		case opBinInt:
			e.kv[at] = Value{Kind: KindInt, N: uint64(int64(int32(binary.LittleEndian.Uint32(buf[p+1:]))))}
			p += 5
		case opLong1:
			u, ok := long1(buf[p:])
			if !ok {
				return 0, false
			}
			e.kv[at] = Value{Kind: KindInt, N: u}
			p += 2 + int(buf[p+1])
		case opShortBinUnicode:
			var ok bool
			if p, ok = d.entryString(p, limit, at, !learn && e.compiled); !ok {
				return 0, false
			}
		case opEmptyList:
			var ok bool
			if p, ok = d.entryList(p, limit, at, mv, !learn && e.compiled); !ok {
				return 0, false
			}
		default:
			return 0, false
		}
	}
}

// skipMemoReads is the position after the memo reads (BINGET, LONG_BINGET)
// from p on, none starting past end: their lengths by compares, not by
// memoID, whose ids would be read and dropped. entryList keeps a frames
// list by these bytes; walkEntry steps over them.
func skipMemoReads(buf []byte, p, end int) int {
	for p <= end {
		switch buf[p] {
		case opBinGet:
			p += 2
		case opLongBinGet:
			p += 5
		default:
			return p
		}
	}
	return p
}

// memoID reads the id of the BINGET or LONG_BINGET at b[0] and the
// opcode's length; 0 if it is neither.
func memoID(b []byte) (uint64, int) {
	switch b[0] {
	case opBinGet:
		return uint64(b[1]), 2
	case opLongBinGet:
		return uint64(binary.LittleEndian.Uint32(b[1:])), 5
	}
	return 0, 0
}

func newEntryKey(op []byte, v Value, memo bool) entryKey {
	var b [8]byte
	copy(b[:], op)
	mask := uint64(1)<<(8*len(op)) - 1
	return entryKey{word: binary.LittleEndian.Uint64(b[:]) & mask, mask: mask, len: uint8(len(op)), memo: memo, v: v}
}

// entryString reads the string at p into e.kv[at], and its MEMOIZE if
// one follows, and returns the position after them. With keep (the dict
// is to be built by Record, whose String interns), a string of at most 8
// bytes that the last dict of the template had at the same place, as
// torch's "N/A" in every entry, gets that dict's value again without the
// sink's String (about 60 instructions an entry of the bench seed).
func (d *Decoder) entryString(p, limit, at int, keep bool) (int, bool) {
	e := &d.ent
	buf := d.buf
	n := int(buf[p+1])
	if d.end-p < 2+n {
		return 0, false
	}
	k := &e.strs[at]
	v, ok := k.get(buf[p+2:], n, e.gen, keep)
	if !ok {
		if v, ok = d.internString(k, buf[p+2:], n, e.gen, keep); !ok {
			return 0, false
		}
	}
	e.kv[at] = v
	p += 2 + n
	if p <= limit && buf[p] == opMemoize {
		if _, ok := packNarrow(v); !ok || !e.put(at) {
			return 0, false
		}
		p++
	}
	return p, true
}

// memoValue reads the memo read (BINGET or LONG_BINGET) at d.buf[p], a
// dict's value, through the view mv, and returns its value and the
// position after it; ok is false where fast() would not push the entry
// itself. readEntry and readShaped read a value so.
func (d *Decoder) memoValue(p int, mv view) (v Value, next int, ok bool) {
	id, n := memoID(d.buf[p:])
	m := &d.memo
	u := m.word(id, mv)
	v, ok = readable(u)
	return v, p + n, ok
}

// entryList reads the list whose EMPTY_LIST is at p, the value at
// e.kv[at]: memoized or not, empty or a batch of memo reads, through
// readEntry's view of the memo. With keep (the dict is to be built by
// Record), a batch of memo reads that a kept list has is not read:
// e.listHit.
func (d *Decoder) entryList(p, limit, at int, mv view, keep bool) (int, bool) {
	e := &d.ent
	buf := d.buf
	m := &d.memo
	if e.list >= 0 {
		return 0, false
	}
	e.list, e.listMarked, e.items = at, false, e.items[:0]
	p++
	if p <= limit && buf[p] == opMemoize {
		if !e.put(-1) {
			return 0, false
		}
		p++
	}
	if p > limit || buf[p] != opMark {
		return p, true
	}
	p++
	if keep {
		q, end := p, min(limit, p+maxKeptList)
		q = skipMemoReads(buf, q, end)
		if q <= limit && q-p <= maxKeptList && buf[q] == opAppends && consumed(buf, q+1, d.end, true) {
			e.listRaw = buf[p:q]
			e.listAt = int(maphash.Bytes(listSeed, e.listRaw) % listSlots)
			if k := &e.lists[e.listAt]; k.gen == e.gen && bytes.Equal(k.raw, e.listRaw) {
				e.listHit, e.listMarked, e.appends = true, true, q
				return q + 1, true
			}
		}
	}
	for p <= limit {
		id, n := memoID(buf[p:])
		if n == 0 {
			break
		}
		u := m.word(id, mv)
		v, ok := readable(u)
		if !ok {
			return 0, false
		}
		e.items = append(e.items, v)
		p += n
	}
	// fast() builds the list at APPENDS only when nothing more can be
	// added to it; so does entry.
	if p > limit || buf[p] != opAppends || !consumed(buf, p+1, d.end, true) {
		return 0, false
	}
	e.listMarked, e.appends = true, p
	return p + 1, true
}

// setKeys sets the keys in kv of the dict read, which readEntry leaves to
// the template (RecordSink.Record needs none).
func (e *entryState) setKeys() {
	for k := range e.nkv / 2 {
		e.kv[2*k] = e.keys[k].v
	}
}

// put notes that kv[at] (-1: the list) is memoized, next after those so far.
func (e *entryState) put(at int) bool {
	if e.nputs == len(e.puts) {
		return false
	}
	e.puts[e.nputs] = at
	e.nputs++
	return true
}

// buildEntry has the sink build the dict read (its list value first, as
// fast() would) and stores the memo entries it made: the dict's own, then
// its values', in the order of their MEMOIZEs, in the current chunk,
// which entry made sure has room.
func (d *Decoder) buildEntry() (Value, error) {
	e := &d.ent
	m := &d.memo
	dict := m.n
	c := dict >> memoChunkBits
	m.chunks[c] = m.chunks[c][:len(m.chunks[c])+1+e.nputs]
	m.n += uint64(1 + e.nputs)
	kv := e.kv[:e.nkv]
	var items []Value
	if e.listMarked {
		items = e.items
	}
	var lv, v Value
	var err error
	at, op := e.setItems, byte(opSetItems) // where a failure is reported
	switch {
	case e.listHit:
		kv[e.list] = e.lists[e.listAt].lv
		lv = kv[e.list]
		_, v, err = d.records.Record(e.tmpl, kv, -1, nil)
	case e.compiled:
		lv, v, err = d.records.Record(e.tmpl, kv, e.list, items)
		if e.listAt >= 0 && err == nil && d.records.Reusable(lv) {
			k := &e.lists[e.listAt]
			k.raw, k.lv, k.gen = append(k.raw[:0], e.listRaw...), lv, e.gen
		}
	case e.list >= 0:
		e.setKeys()
		// An empty list without MARK is built when the dict is complete.
		if e.listMarked {
			at, op = e.appends, opAppends
		}
		if lv, err = d.whole.List(items); err == nil {
			kv[e.list] = lv
			at, op = e.setItems, opSetItems
			v, err = d.whole.Dict(kv)
		}
	default:
		e.setKeys()
		v, err = d.whole.Dict(kv)
	}
	// The values' memo entries, in one pass after the sink built the dict:
	// it changes no value a put names but the list's (put -1).
	for k, at := range e.puts[:e.nputs] {
		switch {
		case at >= 0:
			*m.slot(dict + 1 + uint64(k)), _ = packNarrow(e.kv[at]) // entryValue checked it is narrow
		case err == nil:
			err = m.store(dict+1+uint64(k), lv)
		}
	}
	if err == nil {
		err = d.memo.store(dict, v)
	}
	if err != nil {
		return Value{}, &Error{Offset: d.base + int64(at), Op: op, Err: err}
	}
	return v, nil
}
