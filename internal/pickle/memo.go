package pickle

import (
	"errors"
	"slices"
)

// memo is the pickle memo: an id -> value table that only grows. A 1 GB
// snapshot has about 30 M entries (most of them trace-entry dicts and the
// "N/A" strings torch writes fresh in every entry), so entries are packed
// into 4 bytes: a 5-bit kind and a 27-bit payload, in fixed-size chunks
// that are never copied. Values that do not fit (large ints and floats,
// which CPython never memoizes; record indices past 2**27) go to a side
// table. Measured on a 996 MB real-derived snapshot: 122 MB instead of
// 245 MB with 8-byte entries.
type memo struct {
	chunks [][]uint32
	n      uint64            // dense ids 0..n-1
	sparse map[uint64]uint32 // ids > n from explicit PUTs (protocols 0-3)
	wide   []Value           // values too wide to pack
	tails  []*tailMemo       // spliced tails' entries, by id
	// shared is how many ids from 0 on sit in chunks that forked memos
	// share (fork): none of them may change.
	shared uint64
	// lazy, if not nil, holds ids that a tail's memo reads one by one
	// (forkLazy): its chunks do not hold them.
	lazy *lazyRange
	// chunkBytes is the capacity in bytes of the chunks this memo owns,
	// for the budget: shared ones count for the memo that made them.
	chunkBytes int64
}

// tailMemo is the entries a spliced tail made (split.go), ids lo..hi-1:
// still packed as the tail's values, with the tail's table of wide ones,
// and mapped by tr into the head's when read. The head reads few of them
// after the tail, if any, so mapping them all at the splice (9.5 M entries,
// 55 ms on two cores, on the bench file) would only delay it; a store into
// the range maps them all first.
type tailMemo struct {
	lo, hi uint64
	wide   []Value
	tr     func(Value) Value
}

func (t *tailMemo) value(u uint32) Value { return t.tr(unpack(u, t.wide)) }

// lazyRange is the ids lo..hi-1 of a tail's memo that the stretches
// between its fork's memo and its start stored (split.go): walked by
// counting only, they are read through read, which the caller gives. A
// tail reads almost none of them: a 2-part decode of the 996 MB bench file
// reads one of its tail's 13.6 M, a 16-part one five in all.
type lazyRange struct {
	lo, hi uint64
	read   func(id uint64) (Value, bool)
}

// mapped is the range of ids lo..hi-1 that hold spliced tails' entries,
// which a read maps into the head's values (tailMemo), or, in a tail, its
// lazy ones; empty, 0..0, if there are none. The entries before and after
// it need no mapping.
func (m *memo) mapped() (lo, hi uint64) {
	if m.lazy != nil {
		return m.lazy.lo, m.lazy.hi
	}
	if len(m.tails) > 0 {
		return m.tails[0].lo, m.tails[len(m.tails)-1].hi
	}
	return 0, 0
}

// tailOf returns the index in m.tails of the tail whose entries hold id i,
// or -1. Tails are spliced in the order of their ids, one per part of a
// split decode: a short search from the last.
func (m *memo) tailOf(i uint64) int {
	for k := len(m.tails) - 1; k >= 0; k-- {
		if t := m.tails[k]; i >= t.lo {
			if i < t.hi {
				return k
			}
			return -1
		}
	}
	return -1
}

// forkLazy returns the memo of a tail that starts where n entries were
// memoized, n at least m's length: m's entries, ids m.n..n-1 read one by
// one through read (lazyRange), and its own from n on. m's full chunks are
// shared, not copied (a 1 GB snapshot's memo is 120 MB); its last one,
// which m may still grow, is copied, and so is the start of the chunk
// holding entry n, which the fork appends to (Splice fills it with the
// head's entries). A store into an id below n is refused in both.
func (m *memo) forkLazy(n uint64, read func(id uint64) (Value, bool)) memo {
	n0 := m.n
	full := n0 >> memoChunkBits
	f := memo{n: n, wide: slices.Clone(m.wide), shared: n}
	f.chunks = slices.Clone(m.chunks[:full])
	m.shared = max(m.shared, n0)
	if n > n0 {
		f.lazy = &lazyRange{lo: n0, hi: n, read: read}
	}
	own := func(c []uint32) {
		f.chunks = append(f.chunks, c)
		f.chunkBytes += 4 * int64(cap(c))
	}
	c, k := n>>memoChunkBits, n&(memoChunkLen-1)
	if k0 := n0 & (memoChunkLen - 1); k0 > 0 {
		if full == c {
			// Its entries, then the lazy ones' room, and room to grow.
			o := make([]uint32, k, max(k, min(2*k, memoChunkLen)))
			copy(o, m.chunks[full][:k0])
			own(o)
			return f
		}
		own(slices.Clone(m.chunks[full][:k0]))
	}
	for uint64(len(f.chunks)) < c {
		f.chunks = append(f.chunks, nil) // lazy ids only
	}
	if k > 0 {
		own(make([]uint32, k, max(k, min(2*k, memoChunkLen))))
	}
	return f
}

const (
	// 256 KiB chunks: each part of a split decode leaves its last one
	// partly empty while it runs, and each tail copies the one its fork
	// starts in (forkLazy), so on 16 cores 4 MiB chunks held 70 MB more at
	// the decode's peak (snapshot/trace.go's eventChunkBits says what that
	// cost), and 1 MiB chunks some 10 MiB more than these on the 288 MB
	// bench file (bench/RESULTS.md).
	memoChunkBits = 16
	memoChunkLen  = 1 << memoChunkBits
	payloadBits   = 27
	payloadMask   = 1<<payloadBits - 1
	packedWide    = 31 // packed kind of values kept in memo.wide
)

// Packed kinds: built-in kinds keep their number (0-8); sink kinds
// KindUser+k are stored as 9+k. packedKind and unpackedKind convert.
const packedUser = uint32(KindForeign) + 1

func packedKind(k Kind) (uint32, bool) {
	switch {
	case k < KindUser && k <= KindForeign:
		return uint32(k), true
	case k >= KindUser && uint32(k-KindUser) < packedWide-packedUser:
		return uint32(k-KindUser) + packedUser, true
	}
	return 0, false
}

var unpackedKind = func() (t [32]Kind) {
	for p := range t {
		if uint32(p) < packedUser {
			t[p] = Kind(p)
		} else {
			t[p] = KindUser + Kind(uint32(p)-packedUser)
		}
	}
	return t
}()

// packNarrow packs v into 4 bytes if its kind and payload fit.
func packNarrow(v Value) (uint32, bool) {
	pk, ok := packedKind(v.Kind)
	return pk<<payloadBits | uint32(v.N), ok && v.N <= payloadMask
}

func (m *memo) pack(v Value) uint32 {
	if u, ok := packNarrow(v); ok {
		return u
	}
	m.wide = append(m.wide, v)
	return packedWide<<payloadBits | uint32(len(m.wide)-1)&payloadMask
}

func (m *memo) unpack(u uint32) Value { return unpack(u, m.wide) }

// unpack is the value packed in u, with wide the table of values too wide
// to pack.
func unpack(u uint32, wide []Value) Value {
	k := u >> payloadBits
	if k == packedWide {
		return wide[u&payloadMask]
	}
	return Value{Kind: unpackedKind[k], N: uint64(u & payloadMask)}
}

// bytes is what the memo holds, for the budget: its chunks as allocated,
// and about 48 bytes a sparse entry (map bucket share included).
func (m *memo) bytes() int64 {
	n := m.chunkBytes + int64(len(m.wide))*valueBytes + 48*int64(len(m.sparse))
	for _, t := range m.tails {
		n += int64(len(t.wide)) * valueBytes
	}
	return n
}

// countChunks sets chunkBytes from the chunks, once they were taken over.
func (m *memo) countChunks() {
	m.chunkBytes = 0
	for _, c := range m.chunks {
		m.chunkBytes += 4 * int64(cap(c))
	}
}

// trim cuts the room after the entries of the last chunk, where a tail's
// memo is done growing (the head, which splices it, grows it again by
// append if it must). Chunks with the shared ids are the head's, and
// stay.
func (m *memo) trim() {
	if m.n <= m.shared {
		return
	}
	k := (m.n - 1) >> memoChunkBits
	if c := m.chunks[k]; cap(c)-len(c) >= trimMin {
		m.chunks[k] = make([]uint32, len(c))
		copy(m.chunks[k], c)
		m.countChunks()
	}
}

// trimMin is the least room trim cuts: a copy of a chunk for a few KiB
// saves nothing.
const trimMin = 4 << 10

// len is Python's len(memo): the id the next MEMOIZE uses.
func (m *memo) len() uint64 { return m.n + uint64(len(m.sparse)) }

// placeholder is the packed KindForeign value with payload id: what a
// walk stores for a container (split.go).
func placeholder(id uint64) uint32 { return uint32(KindForeign)<<payloadBits | uint32(id) }

func (m *memo) slot(i uint64) *uint32 {
	return &m.chunks[i>>memoChunkBits][i&(memoChunkLen-1)]
}

var (
	errMemoFull   = errors.New("more than 2**27 memoized values that do not pack (large ints, floats, or records past 2**27)")
	errSharedMemo = errors.New("a store into a memo id made before the split")
)

func (m *memo) put(i uint64, v Value) error {
	if i < m.shared {
		return errSharedMemo
	}
	if k := m.tailOf(i); k >= 0 {
		if err := m.mapTail(k); err != nil {
			return err
		}
	}
	if len(m.wide) >= payloadMask {
		return errMemoFull
	}
	u := m.pack(v)
	switch {
	case i < m.n:
		*m.slot(i) = u
	case i == m.n:
		k := i >> memoChunkBits
		if k == uint64(len(m.chunks)) {
			c := memoChunkLen
			if k == 0 {
				c = 256 // small pickles stay small; the first chunk grows
			}
			ch := make([]uint32, 0, c)
			m.chunks = append(m.chunks, ch)
			m.chunkBytes += 4 * int64(c)
		}
		grown := cap(m.chunks[k])
		m.chunks[k] = append(m.chunks[k], u)
		m.chunkBytes += 4 * int64(cap(m.chunks[k])-grown)
		m.n++
		if m.sparse != nil {
			delete(m.sparse, i)
		}
	default:
		if m.sparse == nil {
			m.sparse = map[uint64]uint32{}
		}
		m.sparse[i] = u
	}
	return nil
}

// store sets id i, which a container being built holds (i < m.n), to the
// container's value.
func (m *memo) store(i uint64, v Value) error {
	if u, ok := packNarrow(v); ok {
		*m.slot(i) = u
		return nil
	}
	return m.put(i, v)
}

// view is how fast() and entry read the memo: ids below n, but for the
// mapped ones (lo..hi-1, which step reads). fast() moves n on as it
// stores.
type view struct{ n, lo, hi uint64 }

func (m *memo) view() view {
	lo, hi := m.mapped()
	return view{n: m.n, lo: lo, hi: hi}
}

// word returns entry id, packed, for fast() and entry (see view), or, if
// they do not read it, a word that readable refuses. The range check is
// unsigned: id-lo < hi-lo is lo <= id < hi.
func (m *memo) word(id uint64, v view) uint32 {
	if id >= v.n || id-v.lo < v.hi-v.lo {
		return packedWide << payloadBits
	}
	return m.chunks[id>>memoChunkBits][id&(memoChunkLen-1)]
}

// readable returns the packed entry u as a value if fast() pushes it
// itself: a narrow value that is not an open container's placeholder.
func readable(u uint32) (Value, bool) {
	pk := u >> payloadBits
	return Value{Kind: unpackedKind[pk&31], N: uint64(u & payloadMask)}, pk != uint32(KindRef) && pk != packedWide
}

func (m *memo) get(i uint64) (Value, bool) {
	if i < m.n {
		if l := m.lazy; l != nil && i-l.lo < l.hi-l.lo {
			return l.read(i)
		}
		if lo, hi := m.mapped(); i >= lo && i < hi {
			if k := m.tailOf(i); k >= 0 {
				return m.tails[k].value(*m.slot(i)), true
			}
		}
		return m.unpack(*m.slot(i)), true
	}
	if u, ok := m.sparse[i]; ok {
		return m.unpack(u), true
	}
	return Value{}, false
}

// replace rewrites id i to v if it still holds old (a closed container's
// handle is swapped for its result; an id reused by a later PUT is left
// alone).
func (m *memo) replace(i uint64, old, v Value) error {
	if cur, ok := m.get(i); ok && cur == old {
		return m.put(i, v)
	}
	return nil
}

// mapTail maps the entries of spliced tail k into the head's values, in
// place.
func (m *memo) mapTail(k int) error {
	t := m.tails[k]
	m.tails = slices.Delete(m.tails, k, k+1)
	for i := t.lo; i < t.hi; i++ {
		s := m.slot(i)
		v := t.value(*s)
		if len(m.wide) >= payloadMask {
			return errMemoFull
		}
		*s = m.pack(v)
	}
	return nil
}
