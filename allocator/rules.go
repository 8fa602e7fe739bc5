// Package allocator holds the rules of PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, torch 2.1 to 2.11) that decide sizes:
// request rounding, the small and large pools, segment sizes and when a
// block is split. The replay of a recorded trace and the allocator model of
// package allocsim both take them from here, so the two cannot disagree.
package allocator

import (
	"math"
	"math/bits"
)

// Constants of CUDACachingAllocator.cpp (c10/core/AllocatorConfig.h from 2.11).
const (
	MinBlockBits  = 9
	MinBlockSize  = 1 << MinBlockBits // kMinBlockSize: every request is rounded to a multiple of it
	SmallSize     = 1 << 20           // kSmallSize: rounded requests up to it use the small pool; large remainders must exceed it to split
	SmallBuffer   = 2 << 20           // kSmallBuffer: a small-pool segment, and the small expandable page
	MinLargeAlloc = 10 << 20          // kMinLargeAlloc: large requests below it get a whole large buffer
	RoundLarge    = 2 << 20           // kRoundLarge: larger segments are rounded up to it
	LargeBuffer   = 20 << 20          // kLargeBuffer: the default large_segment_size_mb and max_non_split_rounding
)

// Unlimited is max_split_size when it is not set (the snapshot's -1).
const Unlimited = math.MaxUint64

// Pool is the kind of pool a rounded size is served from.
type Pool uint8

const (
	Large Pool = iota
	Small
)

func (p Pool) String() string {
	if p == Small {
		return "small"
	}
	return "large"
}

// PoolOf is get_pool's choice inside a pool pair for a rounded size.
func PoolOf(rounded uint64) Pool {
	if rounded <= SmallSize {
		return Small
	}
	return Large
}

// RoundSize is round_size without roundup_power2_divisions: n rounded up
// to a multiple of 512, at least 512.
func RoundSize(n uint64) uint64 {
	if n < MinBlockSize {
		return MinBlockSize
	}
	return (n + MinBlockSize - 1) / MinBlockSize * MinBlockSize
}

// Round is round_size under s's roundup_power2_divisions: sizes above
// 512·d bytes in an interval with d > 1 divisions are rounded up to the next
// of d steps between two powers of two (a power of two stays as it is).
func (s *Settings) Round(n uint64) uint64 {
	if n < MinBlockSize {
		return MinBlockSize
	}
	d := s.Divisions[divisionInterval(n)]
	if d <= 1 || n <= MinBlockSize*d {
		return RoundSize(n)
	}
	if n&(n-1) == 0 {
		return n
	}
	floor := uint64(1) << (63 - leadingZeros(n))
	step := floor / d
	if step == 0 {
		return 2 * floor
	}
	return (n + step - 1) / step * step
}

// divisionInterval is the roundup_power2_divisions interval of n: 0 below
// 2 MiB, then one per power of two, the last from 32 GiB up.
func divisionInterval(n uint64) int {
	i := 63 - leadingZeros(n) - 20
	return max(0, min(i, len(Settings{}.Divisions)-1))
}

func leadingZeros(n uint64) int { return bits.LeadingZeros64(n) }

// SegmentSize is get_allocation_size: what cudaMalloc is asked for when no
// cached block serves a rounded request, with the default 20 MiB large
// buffer.
func SegmentSize(rounded uint64) uint64 {
	return segmentSize(rounded, LargeBuffer)
}

// SegmentSize is get_allocation_size under s (large_segment_size_mb).
func (s *Settings) SegmentSize(rounded uint64) uint64 {
	return segmentSize(rounded, s.LargeSegment)
}

// PageSize is the granularity in which an expandable segment of pool p
// maps and unmaps memory: kSmallBuffer in the small pool, the large
// segment size (kLargeBuffer unless large_segment_size_mb) in the large.
func (s *Settings) PageSize(p Pool) uint64 {
	if p == Small {
		return SmallBuffer
	}
	return s.LargeSegment
}

func segmentSize(rounded, largeBuffer uint64) uint64 {
	switch {
	case rounded <= SmallSize:
		return SmallBuffer
	case rounded < MinLargeAlloc:
		return largeBuffer
	}
	return (rounded + RoundLarge - 1) / RoundLarge * RoundLarge
}

// ShouldSplit is should_split: whether a free block of size block, taken for
// a rounded request, gives its remainder back as a free block. Small-pool and
// expandable blocks split off any remainder of at least 512 bytes; large
// blocks only remainders over 1 MiB, and never for a request of
// max_split_size or more.
func ShouldSplit(pool Pool, expandable bool, rounded, block, maxSplit uint64) bool {
	if block <= rounded {
		return false
	}
	rem := block - rounded
	if pool == Small || expandable {
		return rem >= MinBlockSize
	}
	return rounded < maxSplit && rem > SmallSize
}

// BlockSize is the size of the block a rounded request takes from a free
// range of gap bytes: the rounded size when the remainder is split off,
// else the whole range.
func BlockSize(pool Pool, expandable bool, rounded, gap, maxSplit uint64) uint64 {
	if ShouldSplit(pool, expandable, rounded, gap, maxSplit) {
		return rounded
	}
	return gap
}
