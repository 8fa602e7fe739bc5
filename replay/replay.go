// Package replay replays a snapshot's device traces into timelines of
// allocator usage and rebuilds the allocator state (segments and blocks) at
// any event. It is pure computation over the snapshot model.
//
// Per device:
//
//  1. a cheap forward scan (of a long trace: two halves at once) notes each
//     block address's first and last events and lists the segment events;
//  2. the state before the first event is reconstructed from the final
//     snapshot: its segments with the segment events undone backwards, and
//     as live blocks those active at the end with no alloc in the trace plus
//     those freed in the trace without an alloc (pre-recording, or lost to a
//     wrapped ring buffer);
//  3. one forward pass replays every event on that state, carving each
//     alloc's block out of the free range at its address the way the
//     allocator splits (which recovers rounded sizes the trace does not
//     record), and stores the usage series and one Allocation per block
//     (the layout on one goroutine, records and series on another: run.go);
//  4. Timeline.State rebuilds segments and blocks at any event from the
//     segment events and the Allocation intervals.
//
// Replaying forward from the reconstructed start reproduces the final
// snapshot; where it does not, a FinalMismatch caveat says so.
package replay

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/trace"
	"slices"

	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/snapshot"
)

// Devices replays every device of sn (snapshot.Devices order).
func Devices(sn *snapshot.Snapshot) ([]*Timeline, error) {
	devs := sn.Devices()
	out := make([]*Timeline, 0, len(devs))
	for _, d := range devs {
		t, err := Device(sn, d)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Device replays device d's trace. A device without a trace gets an empty
// timeline whose initial state is the final snapshot.
func Device(sn *snapshot.Snapshot, d int) (*Timeline, error) {
	if d < 0 {
		return nil, fmt.Errorf("replaying device %d: negative device ordinal", d)
	}
	var tr snapshot.Trace
	if d < len(sn.Traces) {
		tr = sn.Traces[d]
	}
	if tr.Len() >= LiveAtEnd {
		return nil, fmt.Errorf("replaying device %d: %d events exceed the supported %d", d, tr.Len(), LiveAtEnd-1)
	}
	st := stagesOn(runtime.GOMAXPROCS(0))
	r := replayDevice(sn, d, tr, st)
	if r.inexact {
		st.shards = 1
		r = replayDevice(sn, d, tr, st) // place.go
	}
	return r.t, nil
}

// replayDevice replays device d's trace tr in a forward pass of stages
// st (run.go).
func replayDevice(sn *snapshot.Snapshot, d int, tr snapshot.Trace, st stages) *replayer {
	r := newReplayer(sn, d, tr)
	r.shards = st.shards
	// The steps are regions of an execution trace (bench/tracecores).
	ctx := context.Background()
	trace.WithRegion(ctx, "replay.scan", r.scan)
	trace.WithRegion(ctx, "replay.reconstruct", r.reconstruct)
	trace.WithRegion(ctx, "replay.run", func() { r.run(st) })
	trace.WithRegion(ctx, "replay.compare", r.compareFinal)
	r.t.Caveats = r.caveats.list()
	return r
}

// finalBlock is an active block of the final snapshot.
type finalBlock struct {
	addr, size, requested uint64
	state                 snapshot.BlockState
	stack                 snapshot.StackID
	seg                   int // index in replayer.finalSegs
}

// addrHistory is what the scan notes per block address.
type addrHistory struct {
	first     int32           // first block event at the address
	lastAlloc int32           // last alloc, or -1
	lastFree  snapshot.Action // strongest free after lastAlloc (0, requested, completed)
}

// knownSize is the exact block size of the alloc at event index: the final
// snapshot still holds that block.
type knownSize struct {
	index int32
	size  uint64
}

// replayer holds one device's replay while it runs.
type replayer struct {
	sn *snapshot.Snapshot
	tr snapshot.Trace
	t  *Timeline

	finalSegs   segmentSet
	finalBlocks []finalBlock

	// From the scan.
	addrIndex    *addrMap[int32] // block address -> index in history
	history      []addrHistory   // in the order of their first events
	counts       [16]int         // events per action
	hasRequested bool            // free_requested is recorded (not in skip_actions)
	hasCompleted bool            // free_completed is recorded

	known  []knownSize // ascending index
	layout *layout
	blocks *addrMap[activeBlock] // address of an active block -> its allocation and requested size
	// sizes is the placer's own map of the active blocks: address -> block
	// size. It reads no record, which the recorder writes meanwhile.
	sizes    *addrMap[uint64]
	traced   segmentSet // ranges reserved by events of the trace
	poolOf   map[snapshot.PoolID]int
	pools    []Sample // per pool index, running
	caveats  caveatCounter
	maxSplit uint64
	shards   int   // of the placer (place.go)
	routed   []int // block events the router gave each shard
	inexact  bool  // the sharded placer could not vouch for its result (place.go)
}

func newReplayer(sn *snapshot.Snapshot, d int, tr snapshot.Trace) *replayer {
	r := &replayer{
		sn:        sn,
		tr:        tr,
		t:         &Timeline{Device: d, Trace: tr, sn: sn, Pools: []snapshot.PoolID{{}}},
		addrIndex: newAddrMap[int32](),
		blocks:    newAddrMap[activeBlock](),
		sizes:     newAddrMap[uint64](),
		poolOf:    map[snapshot.PoolID]int{{}: 0},
	}
	r.maxSplit = math.MaxUint64 // max_split_size unset: every block may split
	if s := sn.Settings; s != nil && s.MaxSplitSize > 0 {
		r.maxSplit = uint64(s.MaxSplitSize)
	}
	for i := range sn.Segments {
		s := &sn.Segments[i]
		if s.Device != d {
			continue
		}
		r.poolIndex(s.Pool)
		r.finalSegs = append(r.finalSegs, segment{addr: s.Address, size: s.TotalSize, segmentInfo: segmentInfo{
			pool: s.Pool, stream: s.Stream, typ: s.Type, expandable: s.Expandable, stack: s.Stack,
		}})
	}
	slices.SortFunc(r.finalSegs, func(a, b segment) int { return cmp.Compare(a.addr, b.addr) })
	for i := range sn.Segments {
		s := &sn.Segments[i]
		if s.Device != d {
			continue
		}
		seg := r.finalSegs.find(s.Address)
		for _, b := range sn.SegmentBlocks(s) {
			if b.State.Active() {
				r.finalBlocks = append(r.finalBlocks, finalBlock{
					addr: b.Address, size: b.Size, requested: b.RequestedSize, state: b.State, stack: b.Stack, seg: seg,
				})
			}
		}
	}
	return r
}

// poolIndex returns p's index in Timeline.Pools, adding it if new. Every
// pool is known before the forward pass, which only looks pools up.
func (r *replayer) poolIndex(p snapshot.PoolID) int {
	if p.IsDefault() {
		return 0
	}
	if k, ok := r.poolOf[p]; ok {
		return k
	}
	k := len(r.t.Pools)
	r.poolOf[p] = k
	r.t.Pools = append(r.t.Pools, p)
	return k
}

// scan is step 1: per-address first and last block events, segment events.
// A long trace is scanned in ranges on every core, merged in order.
func (r *replayer) scan() {
	bounds := parallel.Ranges(r.tr.Len(), scanRangeMin)
	scans := make([]*addrScan, len(bounds)-1)
	parallel.Do(bounds, func(p, lo, hi int) {
		scans[p] = newAddrScan()
		scans[p].run(r.tr, lo, hi)
	})
	first := scans[0]
	for _, s := range scans[1:] {
		first.merge(s)
	}
	r.addrIndex, r.history, r.counts = first.index, first.history, first.counts
	for i, e := range r.tr.Others() {
		r.counts[e.Action&15]++
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			r.t.segEvents = append(r.t.segEvents, int32(i))
		}
	}
	r.hasRequested = r.counts[snapshot.ActionFreeRequested] > 0
	r.hasCompleted = r.counts[snapshot.ActionFreeCompleted] > 0
}

// scanRangeMin is the fewest events a range of the scan holds: on the
// 11.4 M events of the 996 MB bench file the scan took 0.21 s on one core.
const scanRangeMin = 1 << 15

// addrScan is the scan of a range of events: the history of each block
// address, and the number of block events per action.
type addrScan struct {
	index   *addrMap[int32] // address -> index in history
	history []addrHistory
	addrs   []uint64 // history's addresses
	counts  [16]int
}

func newAddrScan() *addrScan { return &addrScan{index: newAddrMap[int32]()} }

// run scans the block events lo..hi-1 of tr.
func (s *addrScan) run(tr snapshot.Trace, lo, hi int) {
	var addrs [snapshot.EventsBlock]uint64
	var actions [snapshot.EventsBlock]snapshot.Action
	for start := lo; start < hi; start += len(addrs) {
		n := tr.Columns(snapshot.Columns{Actions: actions[:min(len(actions), hi-start)], Addrs: addrs[:]}, start)
		for j, act := range actions[:n] {
			switch act {
			case snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
				i, addr := start+j, addrs[j]
				s.counts[act]++
				k, ok := s.index.get(addr)
				if !ok {
					k = int32(len(s.history))
					s.index.set(addr, k)
					s.history = append(s.history, addrHistory{first: int32(i), lastAlloc: -1})
					s.addrs = append(s.addrs, addr)
				}
				h := &s.history[k]
				switch {
				case act == snapshot.ActionAlloc:
					h.lastAlloc, h.lastFree = int32(i), 0
				case act == snapshot.ActionFreeCompleted || h.lastFree == 0:
					h.lastFree = act
				}
			}
		}
	}
}

// merge adds the scan of the events that follow s's, keeping histories in
// the order of their first events.
func (s *addrScan) merge(next *addrScan) {
	for k, addr := range next.addrs {
		h := next.history[k]
		j, ok := s.index.get(addr)
		if !ok {
			s.index.set(addr, int32(len(s.history)))
			s.history = append(s.history, h)
			s.addrs = append(s.addrs, addr)
			continue
		}
		prev := &s.history[j]
		if h.lastAlloc >= 0 {
			prev.lastAlloc, prev.lastFree = h.lastAlloc, h.lastFree
		} else {
			// The strongest free after the last alloc: completed
			// (ActionFreeCompleted) over requested over none (0).
			prev.lastFree = max(prev.lastFree, h.lastFree)
		}
	}
	for a, n := range next.counts {
		s.counts[a] += n
	}
}

// openAtEnd reports whether the block of h's last alloc is still active at
// the end of the trace.
func (r *replayer) openAtEnd(h *addrHistory) bool {
	return h.lastAlloc >= 0 && (h.lastFree == 0 || h.lastFree == snapshot.ActionFreeRequested && r.hasCompleted)
}

// reconstruct is step 2: the segments and live blocks before the first
// event, and the free ranges between them.
func (r *replayer) reconstruct() {
	r.reconstructSegments()
	allocs := r.initialBlocks()
	r.inferSizes(allocs)
	r.layout = newLayout(slices.Clone(r.t.initialSegs), r.maxSplit, r.shards)

	// Free ranges: each initial segment minus its live blocks.
	k := 0
	for _, s := range r.t.initialSegs {
		cur := s.addr
		for ; k < len(allocs) && allocs[k].Addr < s.end(); k++ {
			a := &allocs[k]
			if a.Addr < s.addr {
				continue // outside every segment: counted in inferSizes
			}
			if a.Addr > cur {
				r.layout.addFree(cur, a.Addr)
			}
			cur = max(cur, a.Addr+a.Size)
		}
		if cur < s.end() {
			r.layout.addFree(cur, s.end())
		}
	}

	r.pools = make([]Sample, len(r.t.Pools))
	for _, s := range r.t.initialSegs {
		r.pools[r.poolIndex(s.pool)].Reserved += int64(s.size)
	}
	for i := range allocs {
		a := &allocs[i]
		pool := r.poolIndex(a.Pool)
		k := r.t.add(a, pool)
		r.blocks.set(a.Addr, activeBlock{k, a.Requested})
		r.sizes.set(a.Addr, a.Size)
		p := &r.pools[pool]
		p.Active += int64(a.Size)
		if a.Free != BeforeRecording {
			p.Allocated += int64(a.Size)
			p.Requested += int64(a.Requested)
		}
	}
	for _, p := range r.pools {
		r.t.Initial.add(p)
	}
}

// reconstructSegments undoes the trace's segment events on the final
// segments, noting for every event that creates a range the info of the
// segment it becomes part of.
func (r *replayer) reconstructSegments() {
	segs := slices.Clone(r.finalSegs)
	r.t.segInfos = make([]segmentInfo, len(r.t.segEvents))
	for k := len(r.t.segEvents) - 1; k >= 0; k-- {
		i := int(r.t.segEvents[k])
		e := r.tr.At(i)
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			info, ok := segs.remove(e.Addr, e.Size)
			if !ok {
				r.caveats.add(LayoutConflict, i, e.Size)
				info = guessSegmentInfo(e)
			}
			r.t.segInfos[k] = info
		case snapshot.ActionSegmentFree:
			info := guessSegmentInfo(e)
			segs.add(e.Addr, e.Size, info, false)
			r.t.segInfos[k] = info
		case snapshot.ActionSegmentUnmap:
			info, ok := segs.infoNear(e.Addr, e.Size, e.Stream)
			if !ok {
				info = guessSegmentInfo(e)
			}
			segs.add(e.Addr, e.Size, info, true)
			r.t.segInfos[k] = info
		}
	}
	for _, s := range segs {
		r.poolIndex(s.pool)
	}
	r.t.initialSegs = segs
}

// initialBlocks lists the blocks live before the first event, by address.
// Sizes of FromFree blocks are left 0 for inferSizes.
func (r *replayer) initialBlocks() []Allocation {
	var out []Allocation
	fromSnapshot := make([]bool, len(r.history)) // history entries already covered
	for _, fb := range r.finalBlocks {
		k, ok := r.addrIndex.get(fb.addr)
		if ok && r.history[k].lastAlloc >= 0 {
			if h := &r.history[k]; r.openAtEnd(h) {
				r.known = append(r.known, knownSize{index: h.lastAlloc, size: fb.size})
			}
			continue
		}
		// No alloc at this address in the trace: allocated before recording.
		// Its frees, if any, are replayed by run.
		a := Allocation{
			Addr: fb.addr, Size: fb.size, Requested: fb.requested,
			Start: BeforeRecording, Free: LiveAtEnd, End: LiveAtEnd,
			Stack: fb.stack, Origin: FromSnapshot,
		}
		if fb.seg >= 0 {
			a.Pool, a.Stream = r.finalSegs[fb.seg].pool, r.finalSegs[fb.seg].stream
		}
		if ok {
			fromSnapshot[k] = true
			a.Free = r.initialFree(r.tr.At(int(r.history[k].first)))
		} else if fb.state == snapshot.ActivePendingFree {
			a.Free = BeforeRecording
		}
		out = append(out, a)
		kind := BlocksBeforeRecording
		switch {
		case r.tr.Len() == 0:
			kind = NoTrace
		case fb.stack > snapshot.EmptyStack:
			kind = BlocksBeforeTrace
		}
		r.caveats.add(kind, BeforeRecording, fb.size)
	}
	slices.SortFunc(r.known, func(a, b knownSize) int { return cmp.Compare(a.index, b.index) })

	for k := range r.history {
		h := &r.history[k]
		e := r.tr.At(int(h.first))
		if fromSnapshot[k] || e.Action == snapshot.ActionAlloc {
			continue
		}
		out = append(out, Allocation{
			Addr: e.Addr, Requested: e.Size,
			Start: BeforeRecording, Free: r.initialFree(e), End: LiveAtEnd,
			Stack: e.Stack, Stream: e.Stream, Origin: FromFree,
		})
		r.caveats.add(FreesWithoutAlloc, int(h.first), 0)
		if e.Action == snapshot.ActionFreeCompleted && r.hasRequested {
			r.caveats.add(RingWrapped, int(h.first), 0)
		}
	}
	slices.SortFunc(out, func(a, b Allocation) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// initialFree is the Free index of a block live at the start whose first
// event is e: a free_completed first means its free_requested came before
// recording (when free_requested is recorded at all).
func (r *replayer) initialFree(e snapshot.Event) int32 {
	if e.Action == snapshot.ActionFreeCompleted && r.hasRequested {
		return BeforeRecording
	}
	return LiveAtEnd
}

// inferSizes gives FromFree blocks the size the allocator must have used:
// the rounded request, or up to the next live block or the segment end when
// the remainder is too small to have been split off. The inference is exact
// unless roundup_power2_divisions was set. It also sets the pool.
func (r *replayer) inferSizes(allocs []Allocation) {
	for k := range allocs {
		a := &allocs[k]
		seg := r.t.initialSegs.find(a.Addr)
		if seg < 0 {
			r.caveats.add(UnknownAddress, BeforeRecording, a.Size)
			if a.Size == 0 {
				a.Size = RoundSize(a.Requested)
			}
			continue
		}
		s := &r.t.initialSegs[seg]
		a.Pool = s.pool
		if a.Size != 0 {
			continue
		}
		bound := s.end()
		if k+1 < len(allocs) && allocs[k+1].Addr < bound {
			bound = allocs[k+1].Addr
		}
		a.Size = blockSize(bound-a.Addr, RoundSize(a.Requested), s, r.maxSplit)
		r.caveats[FreesWithoutAlloc].Bytes += a.Size
	}
}
