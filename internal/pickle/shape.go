package pickle

import "encoding/binary"

// Entries laid out as earlier ones.
//
// A template still reads a dict key by key: each key compared, each
// value's opcode dispatched, the position checked against the limit
// twice. On the bench file that is about 1,000 instructions a trace entry
// of eight keys, before its frames list. Yet within a template the
// entries have few byte layouts: the same keys, the same value opcodes,
// the same LONG1 lengths, the same "N/A"; only the values' bytes differ,
// and the size's opcode (BININT1, BININT2 or BININT) makes the layouts
// of the bench file three.
//
// A shape is such a layout, learnt from a dict the template read: its
// bytes from the first key to the last key's end, with the values' bytes
// masked out, and where each value is. A dict that matches a shape word
// by word has its values read at the shape's offsets, its last value
// (the frames list: a fresh list, or a memo read of an earlier one) read
// by its opcode, and the memo puts the template would note. A shape lives
// as long as its template, and serves only templates the sink compiled,
// whose short strings are kept (see entryString). A dict the shapes do
// not cover is the template's to read, with the same result.

// shapeSlots is how many layouts a template keeps, and shapeLearns how
// many it learns at most in a fast() call (each costs about as much as
// reading two dicts by template); maxShapeWords bounds the bytes a shape
// covers (the bench file's entries have 69 before their frames list).
const (
	shapeSlots    = 8
	shapeLearns   = 4 * shapeSlots
	maxShapeWords = 16
	// shapeWindow is what readShaped reads past a dict's first key: a
	// shape's words, and a LONG1 hole's 8 bytes at its end.
	shapeWindow = 8*maxShapeWords + 16
)

// holeKind is how a shape's value is read at its offset.
type holeKind uint8

const (
	holeInt1  holeKind = iota // BININT1
	holeInt2                  // BININT2
	holeInt4                  // BININT
	holeLong1                 // LONG1, its length the shape's
	holeGet1                  // BINGET: the memo's entry
	holeGet4                  // LONG_BINGET
	// A short string, its bytes the shape's: the value it had, which a
	// compiled template's sink gives equal bytes in every dict.
	holeString
)

// valueHoles are the holes of the values of fixed length (scanLen's), by
// opcode.
var valueHoles = [256]holeKind{opBinInt1: holeInt1, opBinInt2: holeInt2, opBinInt: holeInt4, opBinGet: holeGet1, opLongBinGet: holeGet4}

// shapeHole is a value of a shape: its opcode's offset from the first
// key, how it is read, its place in kv, and for LONG1 the shift that
// sign-extends its bytes. A string's v is its value; a memo read's the
// value of the id it read last, id - 1 (0: none). A memo entry a memo
// read can read is not rewritten in the fast() call, which the shape
// lives in (see entry.go's template), and the "" of torch's user_metadata
// is the same read in every entry.
type shapeHole struct {
	off, at uint8
	kind    holeKind
	shift   uint8
	id      uint64
	v       Value
}

// entryShape is a layout of the template's dicts (see above).
type entryShape struct {
	words, masks [maxShapeWords]uint64
	nwords       int
	n            int // the bytes it covers: the last value is at n
	holes        [maxEntryKeys - 1]shapeHole
	nholes       int
	// puts are the memo puts before the last value, as readEntry notes
	// them.
	puts  [maxEntryPuts - 1]int
	nputs int
}

// readShaped reads the dict whose first key is at p by one of the
// template's shapes, as readEntry(p, limit, false) would, and returns the
// position after its SETITEMS; ok is false if no shape matches or the
// read fails, which readEntry then reads. The shape tried first is the
// one that has the dict's byte at disc, else the one that matched last:
// most dicts are laid out as the one before.
func (d *Decoder) readShaped(p, limit int) (int, bool) {
	e := &d.ent
	buf := d.buf
	if len(buf)-p < shapeWindow {
		return 0, false // matches reads a whole shape's words
	}
	// The holes are read from a window of fixed length, at offsets masked
	// to the shape's length (which they are under): no bounds checks.
	win := (*[shapeWindow]byte)(buf[p:])
	var s *entryShape
	first := e.lastShape
	if e.disc > 0 { // disc is within a shape's words
		if j := e.byDisc[win[(e.disc-1)&(8*maxShapeWords-1)]]; j > 0 {
			first = int(j) - 1
		}
	}
	for k, i := 0, first; k < e.nshapes; k, i = k+1, i+1 {
		if i == e.nshapes {
			i = 0
		}
		t := &e.shapes[i]
		if p+8*t.nwords > limit {
			return 0, false
		}
		if t.matches((*[8 * maxShapeWords]byte)(win[:])) {
			s, e.lastShape = t, i
			break
		}
	}
	if s == nil {
		return 0, false
	}
	m := &d.memo
	mv := e.view
	mv.n = m.n
	e.list, e.nputs, e.learnedLen = -1, s.nputs, 0
	e.listAt, e.listHit = -1, false
	e.puts = s.puts
	holes := s.holes[:s.nholes]
	for hi := range holes {
		h := &holes[hi] // not a copy: 32 bytes an item, most of which the switch does not read
		q, kv := int(h.off)&(8*maxShapeWords-1), &e.kv[h.at&(2*maxEntryKeys-1)]
		switch h.kind {
		case holeInt1:
			*kv = Value{Kind: KindInt, N: uint64(win[q+1])}
		case holeInt2:
			*kv = Value{Kind: KindInt, N: uint64(binary.LittleEndian.Uint16(win[q+1:]))}
		case holeInt4:
			*kv = Value{Kind: KindInt, N: uint64(int64(int32(binary.LittleEndian.Uint32(win[q+1:]))))}
		case holeLong1: // as long1 does, with the length the shape's
			u := binary.LittleEndian.Uint64(win[q+2:])
			*kv = Value{Kind: KindInt, N: uint64(int64(u<<h.shift) >> h.shift)}
		case holeGet1, holeGet4:
			id := uint64(win[q+1])
			if h.kind == holeGet4 {
				id = uint64(binary.LittleEndian.Uint32(win[q+1:]))
			}
			if h.id == id+1 {
				*kv = h.v
				continue
			}
			u := m.word(id, mv)
			v, ok := readable(u)
			if !ok {
				return 0, false
			}
			*kv = v
			h.id, h.v = id+1, v
		case holeString:
			*kv = h.v
		}
	}
	// The last value, by its opcode: the frames list, fresh or read from
	// the memo.
	q, at := p+s.n, 2*e.nkeys-1
	switch buf[q] {
	case opEmptyList:
		var ok bool
		if q, ok = d.entryList(q, limit, at, mv, true); !ok {
			return 0, false
		}
	case opBinGet, opLongBinGet:
		var ok bool
		if e.kv[at], q, ok = d.memoValue(q, mv); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	// No opcode past limit, as readEntry: SETITEMS may be the first.
	if q > limit || buf[q] != opSetItems || !consumed(buf, q+1, d.end, false) {
		return 0, false
	}
	e.setItems, e.nkv = q, 2*e.nkeys
	return q + 1, true
}

// matches reports whether b, from a dict's first key on, has the shape's
// bytes. It is a call of its own: inlined in readShaped, whose registers
// were taken, its loop kept its word and its sum on the stack. It compares
// two words a turn: past nwords a shape's masks are 0, so an odd last one
// compares nothing.
//
//go:noinline
func (s *entryShape) matches(b *[8 * maxShapeWords]byte) bool {
	var x uint64
	for w := 0; w < s.nwords; w += 2 {
		k := w & (maxShapeWords - 2) // w, but no bounds check for k and k+1
		x |= (binary.LittleEndian.Uint64(b[8*k:])^s.words[k])&s.masks[k] |
			(binary.LittleEndian.Uint64(b[8*k+8:])^s.words[k+1])&s.masks[k+1]
	}
	return x == 0
}

// learnShape learns the shape of the dict whose first key is at p, which
// readEntry has just read by the compiled template, in the place of the
// shape learnt least lately. A dict with a value a shape does not read (a
// string over 8 bytes, a list before the last key) or longer than a shape
// gets none.
func (d *Decoder) learnShape(p int) {
	e := &d.ent
	if e.learns == shapeLearns {
		return
	}
	e.learns++
	buf := d.buf
	var s entryShape
	var want, care [8 * maxShapeWords]byte
	q := p
	// keep makes the n bytes at q the shape's own, compared.
	keep := func(n int) bool {
		if q+n-p > len(want) {
			return false
		}
		copy(want[q-p:], buf[q:q+n])
		for k := range n {
			care[q-p+k] = 0xff
		}
		q += n
		return true
	}
	hole := func(kind holeKind, at int) {
		s.holes[s.nholes] = shapeHole{off: uint8(q - p), kind: kind, at: uint8(at), v: e.kv[at]}
		s.nholes++
	}
	for k := range e.nkeys {
		if !keep(int(e.keys[k].len)) {
			return
		}
		if k == e.nkeys-1 {
			break // the last value is read by its opcode
		}
		at := 2*k + 1
		// A value's opcode is the shape's, and for LONG1 its length;
		// the rest of it is the value's.
		switch op := buf[q]; op {
		case opBinInt1, opBinInt2, opBinInt, opBinGet, opLongBinGet:
			hole(valueHoles[op], at)
			if !keep(1) {
				return
			}
			q += int(scanLen[op]) - 1
		case opLong1:
			n := int(buf[q+1])
			hole(holeLong1, at)
			s.holes[s.nholes-1].shift = uint8(64 - 8*n) // n is 1 to 8: readEntry read it
			if !keep(2) {
				return
			}
			q += n
		case opShortBinUnicode:
			n := int(buf[q+1])
			if n > 8 {
				return
			}
			hole(holeString, at)
			if !keep(2+n) || buf[q] == opMemoize && !keep(1) {
				return
			}
		default:
			return
		}
		if q-p > len(want) {
			return
		}
	}
	if op := buf[q]; op != opEmptyList && op != opBinGet && op != opLongBinGet {
		return
	}
	s.n = q - p
	s.nwords = (s.n + 7) / 8
	for w := range s.nwords {
		s.words[w] = binary.LittleEndian.Uint64(want[8*w:])
		s.masks[w] = binary.LittleEndian.Uint64(care[8*w:])
	}
	// A list as the last value notes its own MEMOIZE, the last put.
	s.nputs, s.puts = e.nputs, e.puts
	if s.nputs > 0 && e.puts[s.nputs-1] < 0 {
		s.nputs--
	}
	i := e.nextShape
	e.shapes[i], e.lastShape = s, i
	e.nextShape = (i + 1) % shapeSlots
	e.nshapes = max(e.nshapes, i+1)
	if e.disc == 0 && e.nshapes > 1 {
		if o := s.differs(&e.shapes[(i+1)%e.nshapes]); o >= 0 {
			e.disc = o + 1
			for j := range e.nshapes {
				if b, ok := e.shapes[j].byteAt(o); ok {
					e.byDisc[b] = uint8(j + 1)
				}
			}
			return
		}
	}
	if e.disc > 0 {
		for b, j := range e.byDisc {
			if int(j) == i+1 {
				e.byDisc[b] = 0
			}
		}
		if b, ok := s.byteAt(e.disc - 1); ok {
			e.byDisc[b] = uint8(i + 1)
		}
	}
}

// byteAt is the byte the shape has at offset o, if it compares one there.
func (s *entryShape) byteAt(o int) (byte, bool) {
	if o >= 8*s.nwords {
		return 0, false
	}
	sh := 8 * uint(o%8)
	return byte(s.words[o/8] >> sh), byte(s.masks[o/8]>>sh) != 0
}

// differs is the first offset at which s and t compare different bytes,
// or -1.
func (s *entryShape) differs(t *entryShape) int {
	for o := range 8 * min(s.nwords, t.nwords) {
		a, ok := s.byteAt(o)
		b, tok := t.byteAt(o)
		if ok && tok && a != b {
			return o
		}
	}
	return -1
}
