package pickle

// memo is the pickle memo: an id -> value table that only grows. A 1 GB
// snapshot has about 20 M entries (pickle-bench.md), so entries are packed
// into 8 bytes (kind in the top byte, payload below) in fixed-size chunks
// that are never copied. Values whose payload needs all 64 bits (large ints,
// floats) go to a side table.
type memo struct {
	chunks [][]uint64
	n      uint64            // dense ids 0..n-1
	sparse map[uint64]uint64 // ids > n from explicit PUTs (protocols 0-3)
	wide   []Value           // values too wide to pack
}

const (
	memoChunkBits = 16
	memoChunkLen  = 1 << memoChunkBits
	payloadBits   = 56
	kindWide      = 0xff // packed kind for values kept in memo.wide
)

func (m *memo) pack(v Value) uint64 {
	if v.N < 1<<payloadBits {
		return uint64(v.Kind)<<payloadBits | v.N
	}
	m.wide = append(m.wide, v)
	return kindWide<<payloadBits | uint64(len(m.wide)-1)
}

func (m *memo) unpack(u uint64) Value {
	k := u >> payloadBits
	p := u & (1<<payloadBits - 1)
	if k == kindWide {
		return m.wide[p]
	}
	return Value{Kind: Kind(k), N: p}
}

// len is Python's len(memo): the id the next MEMOIZE uses.
func (m *memo) len() uint64 { return m.n + uint64(len(m.sparse)) }

func (m *memo) slot(i uint64) *uint64 {
	return &m.chunks[i>>memoChunkBits][i&(memoChunkLen-1)]
}

func (m *memo) put(i uint64, v Value) {
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
			m.chunks = append(m.chunks, make([]uint64, 0, c))
		}
		m.chunks[k] = append(m.chunks[k], u)
		m.n++
		if m.sparse != nil {
			delete(m.sparse, i)
		}
	default:
		if m.sparse == nil {
			m.sparse = map[uint64]uint64{}
		}
		m.sparse[i] = u
	}
}

func (m *memo) get(i uint64) (Value, bool) {
	if i < m.n {
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
func (m *memo) replace(i uint64, old, v Value) {
	if i < m.n && old.N < 1<<payloadBits {
		if p := m.slot(i); *p == uint64(old.Kind)<<payloadBits|old.N {
			*p = m.pack(v)
		}
		return
	}
	if cur, ok := m.get(i); ok && cur == old {
		m.put(i, v)
	}
}
