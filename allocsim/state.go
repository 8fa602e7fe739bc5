package allocsim

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// block is a range of one segment, as the allocator's Block: allocated to
// a caller, pending (freed by the caller, waiting on record_stream
// events), free and mapped (in its pool's free set), or an unmapped part of
// an expandable reservation.
type block struct {
	addr, size uint64
	requested  uint64
	seg        *segment
	prev, next *block
	allocated  bool
	pending    bool
	mapped     bool
	// waited: the block was pending once, so the replay's record of
	// pending frees may still name it after it was freed; it is never
	// recycled (model.newBlock).
	waited bool
	gcBase uint64 // the pool's get_free_block count when it entered the free set
}

func (b *block) split() bool { return b.prev != nil || b.next != nil }

// usable is find_expandable_block's "allocatable": neither held nor pending.
func (b *block) usable() bool { return b != nil && !b.allocated && !b.pending }

// segment is one cudaMalloc, or one expandable reservation (of which only
// the mapped pages count as reserved).
type segment struct {
	key        poolKey
	fs         *freeSet // its pool's free set on its stream
	base, size uint64
	expandable bool
	mapped     uint64 // mapped bytes of an expandable reservation
}

// poolKey names a free set: the allocator's pools compare the stream first,
// so a block only ever serves requests of its own stream.
type poolKey struct {
	stream snapshot.StreamID
	pool   allocator.Pool
}

// poolSet is the free set of one pool key.
type poolSet struct {
	key poolKey
	fs  *freeSet
}

// freeSet is a pool's free mapped blocks of one stream, ordered as the
// allocator orders them up to torch 2.11: by size, then address.
type freeSet []*block

func less(a, b *block) int {
	return cmp.Or(cmp.Compare(a.size, b.size), cmp.Compare(a.addr, b.addr))
}

func (s freeSet) search(b *block) (int, bool) { return slices.BinarySearchFunc(s, b, less) }

// lowerBound is the index of the first block of at least size bytes.
func (s freeSet) lowerBound(size uint64) int {
	i, _ := slices.BinarySearchFunc(s, size, func(b *block, size uint64) int { return cmp.Compare(b.size, size) })
	return i
}

func (s *freeSet) insert(b *block) {
	i, _ := s.search(b)
	*s = slices.Insert(*s, i, b)
}

func (s *freeSet) remove(b *block) {
	if i, ok := s.search(b); ok {
		*s = slices.Delete(*s, i, i+1)
	}
}
