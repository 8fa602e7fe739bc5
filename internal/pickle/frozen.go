package pickle

import (
	"math/bits"
	"slices"
)

// frozenMemo is a memo's first n entries, read-only, in less memory: the
// memo that Join makes, which every tail of a split decode reads below its
// start (forkAt). Most of a joined memo's entries are walkers' placeholders
// for containers (two of three on the 996 MB bench file: each trace
// entry's dict and frames list), and a placeholder is KindForeign with its
// own id: a bit says so. The other entries are packed in order, found by a
// count of the entries before them that are not placeholders. 46 MB
// instead of 109 on the bench file, which a 16-core decode holds beside the
// tails' own memos at its peak.
type frozenMemo struct {
	n uint64
	// hot is the first hotLen entries as they are: the keys, actions and
	// frames that a trace entry reads are mostly among a file's first ids,
	// and a tail reads one a dozen times an entry, each a load here
	// instead of three in at.
	hot    []uint32
	chunks []frozenChunk // memoChunkLen ids each; those of hot are empty
}

// hotLen is how many of its first ids a frozen memo keeps as they are: 4
// chunks, the first chunk's 2^18 ids of when chunks were 1 MiB.
const (
	hotChunks = 4
	hotLen    = hotChunks * memoChunkLen
)

// newFrozenMemo returns the frozen memo of n entries, to be set chunk by
// chunk.
func newFrozenMemo(n uint64) *frozenMemo {
	return &frozenMemo{n: n, hot: make([]uint32, min(n, hotLen)), chunks: make([]frozenChunk, (n+memoChunkLen-1)/memoChunkLen)}
}

type frozenChunk struct {
	foreign []uint64 // a bit per id: a placeholder
	before  []uint32 // per word of foreign, the entries before it that are not
	values  []uint32 // the entries that are not placeholders, packed
}

// placeholder is the packed KindForeign value with payload id.
func placeholder(id uint64) uint32 { return uint32(KindForeign)<<payloadBits | uint32(id) }

// A freezer packs the entries of one chunk as they come, a run at a time
// (Join translates each run from a walker's memo first): a bit for a
// placeholder, the value for anything else. Its scratch serves chunk
// after chunk. The first chunks, which tails read most, it keeps as they
// are (hot).
type freezer struct {
	lo      uint64 // the chunk's first id
	n       uint   // entries added (unsigned: its bit's word and shift are a shift and a mask)
	hot     bool
	foreign []uint64
	values  []uint32 // scratch, with room for a whole chunk
}

// reset starts the chunk of n entries whose first id is lo, kept as it
// is if hot.
func (z *freezer) reset(lo uint64, n int, hot bool) {
	z.lo, z.n, z.hot = lo, 0, hot
	z.foreign = nil
	if !hot {
		z.foreign = make([]uint64, (n+63)/64)
	}
	if cap(z.values) < n {
		z.values = make([]uint32, 0, memoChunkLen)
	}
	z.values = z.values[:0]
}

// addRun packs the chunk's next entries, us. It has no branch on what an
// entry is: every entry is stored as a value, and the next overwrites it
// where it was a placeholder (one entry's store and bit in one was a
// third of Join's instructions, and walkers' memos alternate placeholders
// and strings as their dicts and lists do).
func (z *freezer) addRun(us []uint32) {
	j, k := z.n, len(z.values)
	if z.hot {
		z.values = append(z.values, us...)
		z.n += uint(len(us))
		return
	}
	values := z.values[:k+len(us)] // the chunk's entries fit: reset made room
	next := placeholder(z.lo + uint64(j))
	var word uint64 // the bits of word j/64 not yet in foreign
	for _, u := range us {
		values[k] = u
		p := b2u(u == next)
		word |= p << (j % 64)
		k += 1 - int(p)
		j++
		next++
		if j%64 == 0 {
			z.foreign[j/64-1] |= word
			word = 0
		}
	}
	if j%64 != 0 {
		z.foreign[j/64] |= word
	}
	z.n, z.values = j, values[:k]
}

// b2u is 1 for true, 0 for false, without a branch.
func b2u(b bool) uint64 {
	var u uint64
	if b {
		u = 1
	}
	return u
}

// set stores the chunk added into f.
func (z *freezer) set(f *frozenMemo) {
	if z.hot {
		copy(f.hot[z.lo:], z.values)
		return
	}
	c := frozenChunk{foreign: z.foreign, before: make([]uint32, len(z.foreign)), values: slices.Clone(z.values)}
	kept := 0
	for w, word := range z.foreign {
		c.before[w] = uint32(kept)
		kept += 64 - bits.OnesCount64(word)
	}
	f.chunks[z.lo/memoChunkLen] = c
}

// at is entry i, packed; i < f.n.
func (f *frozenMemo) at(i uint64) uint32 {
	if i < uint64(len(f.hot)) {
		return f.hot[i]
	}
	c := &f.chunks[i>>memoChunkBits]
	j := i & (memoChunkLen - 1)
	w, bit := c.foreign[j/64], uint64(1)<<(j%64)
	if w&bit != 0 {
		return placeholder(i)
	}
	return c.values[c.before[j/64]+uint32(bits.OnesCount64(^w&(bit-1)))]
}

// bytes is what f holds.
func (f *frozenMemo) bytes() int64 {
	n := 4 * int64(cap(f.hot))
	for _, c := range f.chunks {
		n += 8*int64(cap(c.foreign)) + 4*int64(cap(c.before)+cap(c.values))
	}
	return n
}
