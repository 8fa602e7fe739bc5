package replay

import (
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/snapshot"
)

// Sentinels for Allocation's event indices. They make [Start, Free) and
// [Start, End) plain half-open intervals over event indices.
const (
	// BeforeRecording: the event happened before the oldest retained event.
	BeforeRecording = -1
	// LiveAtEnd: the event did not happen within the trace.
	LiveAtEnd = math.MaxInt32
)

// Origin says where an allocation's record comes from.
type Origin uint8

const (
	// Traced: the alloc event is in the trace.
	Traced Origin = iota
	// FromSnapshot: allocated before recording; known from the final
	// snapshot's block (its size is exact, its stack usually empty).
	FromSnapshot
	// FromFree: allocated before the oldest event and freed in the trace;
	// known only from the free, so Stack is the free's stack and Size is
	// inferred from the requested size and the layout.
	FromFree
)

func (o Origin) String() string {
	switch o {
	case Traced:
		return "traced"
	case FromSnapshot:
		return "from-snapshot"
	case FromFree:
		return "from-free"
	}
	return "Origin(?)"
}

// Allocation is one block's life on the timeline. Indices are int32 (traces
// stay far below 2^31 events) to keep the record at 64 bytes: a trace holds
// millions of them.
type Allocation struct {
	Addr      uint64
	Size      uint64 // block size, rounded as the allocator did
	Requested uint64 // bytes the caller asked for
	Pool      snapshot.PoolID
	// Start is the alloc event, or BeforeRecording.
	Start int32
	// Free is the free_requested event (the block stops counting as
	// allocated); BeforeRecording if the block was already pending free at
	// the first event, LiveAtEnd if never freed.
	Free int32
	// End is the free_completed event (the block stops being active), or
	// LiveAtEnd.
	End    int32
	Stack  snapshot.StackID
	Stream snapshot.StreamID
	Origin Origin
}

// AllocatedAt reports whether the block is allocated (not yet freed by the
// caller) right after event i.
func (a *Allocation) AllocatedAt(i int) bool { return int(a.Start) <= i && i < int(a.Free) }

// ActiveAt reports whether the block occupies memory (allocated or pending
// free) right after event i.
func (a *Allocation) ActiveAt(i int) bool { return int(a.Start) <= i && i < int(a.End) }

// Sample is the allocator's usage at one point of the timeline, in bytes.
type Sample struct {
	Allocated int64 // Σ block sizes of allocated blocks (allocated_bytes)
	Requested int64 // Σ requested sizes of allocated blocks
	Active    int64 // allocated + pending-free blocks (active_bytes)
	Reserved  int64 // Σ segment sizes (reserved_bytes)
}

func (s *Sample) add(o Sample) {
	s.Allocated += o.Allocated
	s.Requested += o.Requested
	s.Active += o.Active
	s.Reserved += o.Reserved
}

func (s *Sample) get(m Metric) int64 {
	switch m {
	case Allocated:
		return s.Allocated
	case Requested:
		return s.Requested
	case Active:
		return s.Active
	}
	return s.Reserved
}

// Metric names one series of a Timeline.
type Metric uint8

const (
	Allocated Metric = iota
	Requested
	Active
	Reserved
	numMetrics
)

var metricNames = [numMetrics]string{"allocated", "requested", "active", "reserved"}

func (m Metric) String() string {
	if m < numMetrics {
		return metricNames[m]
	}
	return "Metric(?)"
}

// Peak is the first event at which a series reaches its maximum.
type Peak struct {
	Index  int // BeforeRecording when the initial state is the maximum
	TimeUS int64
	Bytes  int64
}

// Bucket is a series' range over events First..Last inclusive.
type Bucket struct {
	First, Last int
	Min, Max    int64
}

// PoolUsage is one pool's usage at an event.
type PoolUsage struct {
	Pool snapshot.PoolID
	Sample
}

// reservedStep is the reserved total from event Index on.
type reservedStep struct {
	index int32
	bytes int64
}

// poolStep is a private pool's usage from event Index on.
type poolStep struct {
	index int
	Sample
}

// Timeline is one device's replayed trace: usage after every event, the
// life of every block, and what the reconstruction had to assume.
type Timeline struct {
	Device int
	Trace  snapshot.Trace
	// Initial is the usage before the first event: the final snapshot with
	// the trace undone.
	Initial Sample
	// Pools lists the device's pools; Pools[0] is the default pool.
	Pools   []snapshot.PoolID
	Caveats []Caveat

	// allocs holds every block that is active at some point of the
	// trace (see Allocation), full the Allocations that a record cannot
	// hold alone. Peak and leak findings read live sets from them.
	allocs []allocRecord
	full   []Allocation

	// Allocated and active change on most events: dense, in 512-byte
	// units. Requested is kept as waste, allocated minus requested (the
	// rounding inside allocated blocks: small, and not negative on real
	// traces), in bytes. 7-9 bytes per event for the three on real
	// traces (see series). Reserved changes only on segment events: a
	// step list.
	allocated, active, waste series
	reserved                 []reservedStep
	// poolInitial and poolSteps follow the private pools (Pools[1:]); the
	// default pool is the total minus them, so a single-pool trace stores
	// nothing extra.
	poolInitial []Sample
	poolSteps   [][]poolStep
	peaks       [numMetrics]Peak

	// For State: the segments before the first event, the segment events
	// and the info of the ranges they create.
	sn          *snapshot.Snapshot
	initialSegs segmentSet
	segEvents   []int32
	segInfos    []segmentInfo
}

// Len is the number of events.
func (t *Timeline) Len() int { return t.allocated.len() }

// Value returns series m right after event i; i = BeforeRecording gives the
// initial value.
func (t *Timeline) Value(m Metric, i int) int64 {
	if i < 0 {
		return t.Initial.get(m)
	}
	switch m {
	case Allocated:
		return t.allocated.at(i)
	case Requested:
		return t.allocated.at(i) - t.waste.at(i)
	case Active:
		return t.active.at(i)
	}
	return t.reservedAt(i)
}

// MaxIn returns the largest value of series m (Allocated or Active) right
// after events lo..hi-1, lo < hi: a pass that looks for values above a
// bound skips the stretches whose largest is not, at a fraction of reading
// each value.
func (t *Timeline) MaxIn(m Metric, lo, hi int) int64 {
	switch m {
	case Allocated:
		return t.allocated.maxIn(lo, hi)
	case Active:
		return t.active.maxIn(lo, hi)
	}
	panic(fmt.Sprintf("replay: MaxIn of %v", m))
}

// PeakIn returns the first of events lo..hi-1 (lo < hi) right after which
// series m (Allocated or Active) is highest, and that value. The stretches
// of events that cannot beat the highest so far are skipped on MaxIn, at a
// fraction of reading each value: a training trace's steps and buckets are
// thousands of events with one peak each.
func (t *Timeline) PeakIn(m Metric, lo, hi int) (int, int64) {
	best, top := lo, t.Value(m, lo)
	for from, to := range Stretches(lo+1, hi) {
		if t.MaxIn(m, from, to) <= top {
			continue
		}
		for i := from; i < to; i++ {
			if v := t.Value(m, i); v > top {
				best, top = i, v
			}
		}
	}
	return best, top
}

// Stretches cuts events lo..hi-1 into the runs that passes skipping on
// MaxIn test at once, each [from, to): eight of the series' blocks, aligned
// to them so that MaxIn reads whole blocks.
func Stretches(lo, hi int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for from := lo; from < hi; {
			to := min(hi, from&^(StretchLen-1)+StretchLen)
			if !yield(from, to) {
				return
			}
			from = to
		}
	}
}

// StretchLen is the length of a whole stretch (Stretches).
const StretchLen = 8 * blockLen

// At returns every series right after event i (BeforeRecording: initial).
func (t *Timeline) At(i int) Sample {
	if i < 0 {
		return t.Initial
	}
	allocated := t.allocated.at(i)
	return Sample{Allocated: allocated, Requested: allocated - t.waste.at(i), Active: t.active.at(i), Reserved: t.reservedAt(i)}
}

func (t *Timeline) reservedAt(i int) int64 {
	k, found := slices.BinarySearchFunc(t.reserved, int32(i), func(s reservedStep, i int32) int {
		return int(s.index) - int(i)
	})
	if !found {
		k--
	}
	if k < 0 {
		return t.Initial.Reserved
	}
	return t.reserved[k].bytes
}

// Peak returns the first event where series m is highest.
func (t *Timeline) Peak(m Metric) Peak { return t.peaks[m] }

// Downsample splits the events into at most n buckets of consecutive events
// and returns each bucket's minimum and maximum of series m, so a plot of
// millions of events keeps every spike.
func (t *Timeline) Downsample(m Metric, n int) []Bucket {
	events := t.Len()
	if n <= 0 || events == 0 {
		return []Bucket{}
	}
	n = min(n, events)
	out := make([]Bucket, n)
	step := 0 // index in t.reserved of the next step
	cur := t.Initial.Reserved
	for b := range out {
		first, last := b*events/n, (b+1)*events/n-1
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for i := first; i <= last; i++ {
			var v int64
			if m == Reserved {
				for step < len(t.reserved) && int(t.reserved[step].index) <= i {
					cur = t.reserved[step].bytes
					step++
				}
				v = cur
			} else {
				v = t.Value(m, i)
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		out[b] = Bucket{First: first, Last: last, Min: lo, Max: hi}
	}
	return out
}

// PoolsAt returns each pool's usage right after event i (BeforeRecording:
// initial), default pool first.
func (t *Timeline) PoolsAt(i int) []PoolUsage {
	out := make([]PoolUsage, len(t.Pools))
	def := t.At(i)
	for p := 1; p < len(t.Pools); p++ {
		s := t.poolInitial[p-1]
		steps := t.poolSteps[p-1]
		k, found := slices.BinarySearchFunc(steps, i, func(s poolStep, i int) int { return s.index - i })
		if !found {
			k--
		}
		if k >= 0 {
			s = steps[k].Sample
		}
		out[p] = PoolUsage{Pool: t.Pools[p], Sample: s}
		def.Allocated -= s.Allocated
		def.Requested -= s.Requested
		def.Active -= s.Active
		def.Reserved -= s.Reserved
	}
	out[0] = PoolUsage{Pool: t.Pools[0], Sample: def}
	return out
}

// LiveAt returns the indices (for Allocation) of the blocks active right
// after event i (BeforeRecording: at the start), in ascending order. Peak
// attribution groups them by Stack.
func (t *Timeline) LiveAt(i int) []int { return t.blocksAt(i, true) }

// AllocatedAt returns, as LiveAt, the blocks allocated (not pending free)
// right after event i: those the allocated series counts there; at
// LiveAtEnd-1, those never freed.
func (t *Timeline) AllocatedAt(i int) []int { return t.blocksAt(i, false) }

// blocksAt returns the allocations that start at or before event i and end
// (active: at their free_completed, else at their free_requested) after
// it, ascending. Allocations come by start, and at any moment few of a
// trace's millions are live: ranges of them are scanned on every core. On
// one, the scans for the peak's blocks, the breakdown's peak table and end
// callsites and its workspaces were about 40 ms of analyze's longest path
// on 16 cores (the 996 MB bench file, bench/RESULTS.md).
func (t *Timeline) blocksAt(i int, active bool) []int {
	bounds := parallel.Ranges(len(t.allocs), blocksRangeMin)
	parts := make([][]int, len(bounds)-1)
	parallel.Do(bounds, func(p, lo, hi int) {
		for k := lo; k < hi; k++ {
			r := &t.allocs[k]
			if int(r.start) > i {
				break // ordered by Start
			}
			end := r.free
			if active {
				end = r.end
			}
			if i < int(end) {
				parts[p] = append(parts[p], k)
			}
		}
	})
	return slices.Concat(parts...)
}

// blocksRangeMin is the fewest allocations a range of blocksAt scans; a
// variable, for tests to split small traces.
var blocksRangeMin = 1 << 16
