// Package allocsim replays the requests of a PyTorch memory snapshot's
// trace through a model of the CUDA caching allocator (package allocator
// holds its size rules), to check the model against what the trace
// recorded and to predict what the same run would have reserved, and
// whether it would have run out of memory, under other allocator settings,
// a memory cap or empty_cache() calls.
//
// The trace gives the requests exactly: every alloc with its requested
// size and stream, every free in its recorded order (a free_completed long
// after its free_requested is a record_stream free, kept where it was),
// and the empty_cache() calls (a burst of segment_free/segment_unmap that
// no allocation closes). The model works out the rest: rounding, the
// block each request takes, splits and merges, and when device memory is
// allocated, mapped, freed or unmapped.
package allocsim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Config is what a simulation runs under besides the allocator settings.
type Config struct {
	// Limit is allowed_memory_maximum, the cap that
	// set_per_process_memory_fraction sets, in bytes; 0 for none. It also
	// turns on garbage_collection_threshold.
	Limit uint64
	// Capacity is the device memory the process can get; 0: unbounded.
	Capacity uint64
	// DeviceMemory is the device's total memory (sizes an expandable
	// reservation); 0 when unknown.
	DeviceMemory uint64
	// EmptyCacheAt are trace event indices before which empty_cache() is
	// called, in addition to the calls the trace recorded.
	EmptyCacheAt []int
	// Initial is the allocator's state at the first event, for a trace that
	// starts late (Recorded.Initial); nil: an empty allocator.
	Initial *replay.State
	// Bound gives new segments the addresses the trace recorded while the
	// model's device calls agree with it (a validation replay).
	Bound bool
}

// Point is reserved bytes after a trace event.
type Point struct {
	Event int
	Bytes uint64
}

// Stats are a replay's outcome.
type Stats struct {
	MaxReserved     uint64
	MaxAllocated    uint64
	AllocatedAtPeak uint64
	DeviceAllocs    int // segment_alloc and segment_map
	DeviceFrees     int // segment_free and segment_unmap
	Retries         int // num_alloc_retries
	// Start is reserved bytes before the first event: 0, or what the
	// state a late trace starts from holds (Config.Initial).
	Start uint64
	// Reserved is reserved bytes after each device call: the simulated
	// curve to draw beside the recorded one (Recorded.Reserved).
	Reserved []Point
	OOM      *OOM
}

// FragmentationAtPeak is (reserved - allocated) / reserved at the reserved peak.
func (s *Stats) FragmentationAtPeak() float64 {
	if s.MaxReserved == 0 {
		return 0
	}
	return float64(s.MaxReserved-s.AllocatedAtPeak) / float64(s.MaxReserved)
}

// OOM is the first request the allocator could not serve.
type OOM struct {
	Event     int               `json:"event"` // trace index of the request
	Requested uint64            `json:"requested_bytes"`
	Rounded   uint64            `json:"rounded_bytes"`
	AllocSize uint64            `json:"alloc_size_bytes"` // what cudaMalloc was asked for
	Stream    snapshot.StreamID `json:"stream"`
	Stack     snapshot.StackID  `json:"-"`
	Reserved  uint64            `json:"reserved_bytes"`
	Limit     uint64            `json:"limit_bytes"`
	Reason    string            `json:"reason"` // "memory fraction" or "device memory"
}

// Result is one device's replay.
type Result struct {
	Device   int
	Settings allocator.Settings
	Config   Config
	Stats
	events []deviceEvent
	// misplaced counts allocations a bound replay put at another address
	// than the trace's, the first at event firstMisplaced.
	misplaced, firstMisplaced int
}

// Run replays rec's trace of sn under settings s and cfg. The simulation
// stops at the first OOM, as the program would have.
func Run(sn *snapshot.Snapshot, rec *Recorded, s allocator.Settings, cfg Config) (*Result, error) {
	if s.Backend != "" && s.Backend != "native" {
		return nil, fmt.Errorf("backend %s: only the native caching allocator is modelled", s.Backend)
	}
	tr, in := rec.trace, &rec.scan
	var addrs addresser = &fresh{next_: 0x7e0000000000}
	if cfg.Bound {
		addrs = &bound{recorded: in.device, fresh: fresh{next_: 0x7e0000000000}}
	}
	m := newModel(s, cfg, sn.Stream, addrs)
	res := &Result{Device: rec.Device, Settings: s, Config: cfg}
	// The empty_cache() calls, recorded and added, in trace order.
	calls := slices.Concat(in.emptyCalls, cfg.EmptyCacheAt)
	slices.Sort(calls)
	live := map[uint64]*block{}    // by recorded address
	waiting := map[uint64]*block{} // freed by the caller, not yet completed
	if cfg.Initial != nil {
		live, waiting = m.seed(cfg.Initial)
		m.stats.Start = m.reserved
	}
	n := tr.Len()
	var held []*block // record_stream frees a recorded retry's sync completed
	for i := 0; i < n; i++ {
		m.at = i
		if len(calls) > 0 && calls[0] == i {
			m.releaseCached()
			for len(calls) > 0 && calls[0] == i {
				calls = calls[1:]
			}
		}
		e := tr.At(i)
		if e.Action != snapshot.ActionOOM && rec.private.holds(e.Addr) {
			m.fixed(e, in.hasRequested)
			continue
		}
		switch e.Action {
		case snapshot.ActionAlloc, snapshot.ActionOOM:
			b, why := m.malloc(e.Size, e.Stream)
			for _, h := range held { // the model's malloc needed no retry
				if h.pending {
					m.freeBlock(h)
				}
			}
			held = held[:0]
			if b == nil {
				size := s.Round(e.Size)
				m.stats.OOM = &OOM{Event: i, Requested: e.Size, Rounded: size, AllocSize: s.SegmentSize(size),
					Stream: e.Stream, Stack: e.Stack, Reserved: m.reserved, Limit: cfg.Limit, Reason: why.String()}
				res.Stats, res.events = m.stats, m.events
				return res, nil
			}
			if e.Action == snapshot.ActionOOM {
				// Served here, it failed in the run: what the trace holds
				// after it is what the program did without it.
				m.release(b, false)
				continue
			}
			if cfg.Bound && b.addr != e.Addr {
				if res.misplaced == 0 {
					res.firstMisplaced = i
				}
				res.misplaced++
			}
			live[e.Addr] = b
		case snapshot.ActionFreeRequested:
			b := live[e.Addr]
			if b == nil {
				continue // allocated before recording started
			}
			delete(live, e.Addr)
			if !in.hasCompleted {
				m.release(b, false)
				continue
			}
			if i+1 < n && !(len(calls) > 0 && calls[0] == i+1) {
				// Most frees complete at once: skip the pending state.
				if f := tr.At(i + 1); f.Action == snapshot.ActionFreeCompleted && f.Addr == e.Addr {
					m.release(b, false)
					i++
					continue
				}
			}
			m.release(b, true)
			waiting[e.Addr] = b
		case snapshot.ActionFreeCompleted:
			if b := waiting[e.Addr]; b != nil {
				delete(waiting, e.Addr)
				switch {
				case !b.pending: // an empty_cache or retry completed it earlier
				case syncedByRetry(tr, i, calls):
					held = append(held, b) // pending for the first attempt; the retry's sync completes it
				default:
					m.freeBlock(b)
				}
			} else if b := live[e.Addr]; b != nil && !in.hasRequested {
				delete(live, e.Addr)
				m.release(b, false)
			}
		}
		if m.reserved == m.stats.MaxReserved {
			m.stats.AllocatedAtPeak = max(m.stats.AllocatedAtPeak, m.allocated)
		}
	}
	res.Stats, res.events = m.stats, m.events
	return res, nil
}

// syncedByRetry reports whether the free_completed at i came from the sync
// of a release and retry inside the next malloc, rather than from the
// event polling at its start: a release burst that is no empty_cache()
// call follows the completions.
func syncedByRetry(tr snapshot.Trace, i int, calls []int) bool {
	for k := i + 1; k < tr.Len(); k++ {
		switch tr.At(k).Action {
		case snapshot.ActionFreeCompleted:
			continue
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			return !slices.Contains(calls, k)
		}
		return false
	}
	return false
}

func (f failure) String() string {
	switch f {
	case overLimit:
		return "memory fraction"
	case overCapacity:
		return "device memory"
	}
	return ""
}

func deviceTrace(sn *snapshot.Snapshot, device int) (snapshot.Trace, error) {
	const need = "simulate needs the allocation requests of a trace (torch.cuda.memory._record_memory_history(max_entries=...) before the run); stats and explain still read the dump's segments"
	if device < 0 || device >= len(sn.Traces) || sn.Traces[device].Len() == 0 {
		return snapshot.Trace{}, fmt.Errorf("device %d: the snapshot holds no trace (history not recorded, or torch before 2.0): %s", device, need)
	}
	tr := sn.Traces[device]
	for _, e := range tr.All() {
		if e.Action == snapshot.ActionAlloc {
			return tr, nil
		}
	}
	return tr, fmt.Errorf("device %d: the trace holds no allocation (recorded with enabled=\"state\", or a ring buffer too small): %s", device, need)
}

// recorded is what one pass over a trace tells before the replay.
type recorded struct {
	device       []deviceEvent // the recorded segment events
	emptyCache   map[int]bool  // events an empty_cache() call came before
	emptyCalls   []int         // the same, in order
	hasRequested bool
	hasCompleted bool
	hasStacks    bool // some alloc carries a stack (not context=None)
	streams      map[snapshot.StreamID]bool
	// lower and upper bound the cap the allocator ran under, from the
	// device allocations that fitted and those that failed first (a release
	// and retry, or an OOM); upper is 0 when none failed.
	lower, upper uint64
	net          int64 // bytes the trace reserved minus those it released
}

// scan finds the recorded device events and empty_cache() calls: a burst
// of segment_free/segment_unmap (with the free_completed events of its
// sync) that no segment_alloc, segment_map or oom closes, or whose stack
// passes through empty_cache. Any other burst belongs to a malloc: its
// release and retry after a failed cudaMalloc, or garbage collection.
func scan(sn *snapshot.Snapshot, device int, tr snapshot.Trace, s *allocator.Settings, start int64) recorded {
	r := recorded{emptyCache: map[int]bool{}, streams: map[snapshot.StreamID]bool{}}
	stepEnds := annotationEnds(sn, device)
	var lastBlockUS int64 // time of the last alloc or free
	cur := start
	burst, byCall := -1, false // the open burst, and whether its stack shows empty_cache
	groupStart, mapAt := cur, int64(-1)
	released := -1 // the burst of this malloc, if any
	// A burst that a cudaMalloc closes is a release and retry, or an
	// empty_cache() just before a cache miss: without a stack only the cap
	// tells them apart, so each such burst keeps the cap it would imply
	// and is judged once every allocation that fitted is known.
	type retry struct {
		burst int
		bound uint64
	}
	var retries []retry
	closeBurst := func(call bool) {
		if burst >= 0 && (call || byCall) {
			r.emptyCache[burst] = true
			groupStart = cur
		} else if burst >= 0 {
			released = burst
		}
		burst, byCall = -1, false
	}
	for i, e := range tr.All() {
		switch e.Action {
		case snapshot.ActionAlloc, snapshot.ActionOOM:
			closeBurst(false)
			lastBlockUS = e.TimeUS
			r.streams[e.Stream] = true
			r.hasStacks = r.hasStacks || e.Stack != snapshot.NoStack
			alloc := s.SegmentSize(s.Round(e.Size))
			if mapAt >= 0 {
				r.lower = max(r.lower, uint64(mapAt)+alloc)
			}
			switch {
			case e.Action == snapshot.ActionOOM:
				r.tighten(uint64(cur) + alloc - 1)
			case released >= 0 && mapAt >= 0 && s.GCThreshold == 0:
				retries = append(retries, retry{released, uint64(groupStart) + alloc - 1})
			}
			groupStart, mapAt, released = cur, -1, -1
		case snapshot.ActionFreeRequested:
			lastBlockUS = e.TimeUS
			r.hasRequested = true
			closeBurst(true)
			groupStart = cur
		case snapshot.ActionFreeCompleted:
			r.hasCompleted = true
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			closeBurst(false)
			if mapAt < 0 {
				mapAt = cur
			}
			cur += int64(e.Size)
			r.net += int64(e.Size)
			r.device = append(r.device, deviceEvent{Action: e.Action, Addr: e.Addr, Size: e.Size, At: i})
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			if burst < 0 {
				burst = i
			}
			if burst == i {
				byCall = endsStep(stepEnds, lastBlockUS, e.TimeUS)
			}
			byCall = byCall || CallsEmptyCache(sn, e.Stack)
			cur -= int64(e.Size)
			r.net -= int64(e.Size)
			r.device = append(r.device, deviceEvent{Action: e.Action, Addr: e.Addr, Size: e.Size, At: i})
		default:
			closeBurst(true)
		}
	}
	closeBurst(true)
	for _, rt := range retries {
		if rt.bound < r.lower {
			r.emptyCache[rt.burst] = true // no cap lets every fitted allocation fit and this one fail
			continue
		}
		r.tighten(rt.bound)
	}
	for i := range r.emptyCache {
		r.emptyCalls = append(r.emptyCalls, i)
	}
	slices.Sort(r.emptyCalls)
	return r
}

// tighten lowers the cap's upper bound to b.
func (r *recorded) tighten(b uint64) {
	if r.upper == 0 || b < r.upper {
		r.upper = b
	}
}

// annotationEnds are the sorted times of device's record_function
// annotations, each negated when it is a START: a step's end is an END
// with no START after it.
func annotationEnds(sn *snapshot.Snapshot, device int) []int64 {
	var ts []int64
	for _, a := range sn.Annotations {
		if a.Device != device || a.TimeUS <= 0 {
			continue
		}
		if a.Stage == "START" {
			ts = append(ts, -a.TimeUS)
		} else {
			ts = append(ts, a.TimeUS)
		}
	}
	slices.SortFunc(ts, func(a, b int64) int { return cmp.Compare(abs(a), abs(b)) })
	return ts
}

func abs(t int64) int64 { return max(t, -t) }

// endsStep reports whether the last annotation between from and to is an
// END: a release burst there, right after a record_function ended and
// before anything else was allocated or freed, is an empty_cache() at the
// end of a step (without a stack, its only mark), not a retry inside the
// next step's first allocation.
func endsStep(anns []int64, from, to int64) bool {
	i, _ := slices.BinarySearchFunc(anns, to+1, func(a, t int64) int { return cmp.Compare(abs(a), t) })
	return i > 0 && anns[i-1] > 0 && anns[i-1] >= from
}

// CallsEmptyCache reports whether stack id passes through
// torch.cuda.empty_cache (torch/cuda/memory.py): a release of cached
// memory that the program asked for, not one the allocator made itself to
// retry a failed cudaMalloc. A release without a stack cannot tell.
func CallsEmptyCache(sn *snapshot.Snapshot, id snapshot.StackID) bool {
	if sn == nil || id == snapshot.NoStack || id == snapshot.EmptyStack {
		return false
	}
	return slices.ContainsFunc(sn.Stack(id), func(f snapshot.FrameID) bool {
		fr := sn.Frames[f]
		return fr.Name == "empty_cache" && strings.HasSuffix(strings.ReplaceAll(fr.Filename, `\`, "/"), "torch/cuda/memory.py")
	})
}

// fresh hands out addresses that no segment had: ties between equal free
// blocks then go to the older segment.
type fresh struct{ next_ uint64 }

func (f *fresh) next(_ snapshot.Action, size uint64, _ int) uint64 {
	a := f.next_
	f.next_ += (size + allocator.LargeBuffer - 1) / allocator.LargeBuffer * allocator.LargeBuffer
	return a
}

// bound hands out the recorded addresses while the model's device events
// match the recorded ones position by position.
type bound struct {
	recorded []deviceEvent
	fresh
}

func (b *bound) next(a snapshot.Action, size uint64, emitted int) uint64 {
	if emitted < len(b.recorded) {
		r := b.recorded[emitted]
		if r.Action == a && (r.Size == size || a == snapshot.ActionSegmentMap) {
			return r.Addr
		}
	}
	return b.fresh.next(a, size, emitted)
}
