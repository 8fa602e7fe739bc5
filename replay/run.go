package replay

import (
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// run is step 3: one forward pass over the events, in a pipeline of
// goroutines a batch of events apart, each with a few map operations or
// record updates per event and no allocation. Unpackers unpack the
// events. The matcher (match) keeps the map of active blocks: which
// allocation each free ends. The placer (place.go, in shards) keeps the
// allocator's layout: which block each alloc takes, of what size and in
// which pool. The recorder (open, then record) writes each alloc's record
// and ends it at its free, and says by how much each event changes the
// usage, which the accountant (account, on this goroutine) sums for the
// peaks and the pools, and the writers (write) for the series they code.
// On the 996 MB bench file (11.4 M events) the pass took 0.65 s on one
// core. On 16 it took 0.6 s of wall time as two goroutines (the matcher
// and placer one, the accountant with the writer the other), as long as
// the first alone, and 0.35 s split so; analyze of that file took
// 1.19-1.28 s instead of 1.22-1.51 (4 runs each, alternating), and no
// longer on 2 cores (6 pairs side by side, median 0.93 of the old time;
// bench/RESULTS.md).
func (r *replayer) run(st stages) {
	t := r.t
	ps := r.placers()
	n := r.tr.Len()
	// Hundreds of MB of fresh output on the 996 MB bench file, on the
	// system's pages: advised for huge pages, they once cut the page
	// faults, but the replay now took 0.96-1.04 s instead of 0.73-0.75 s
	// on one core of the dev VM (first touches zeroing 2 MiB at a time),
	// and no less on the GPU host (bench/RESULTS.md).
	t.allocated, t.active = newSeries(n, allocator.MinBlockBits), newSeries(n, allocator.MinBlockBits)
	t.waste = newSeries(n, 0)
	// The recorder writes each traced alloc's record, and its free and
	// end: records are kept in place, not appended.
	initial := len(t.allocs)
	allocs := make([]allocRecord, initial+r.counts[snapshot.ActionAlloc])
	copy(allocs, t.allocs)
	t.allocs = allocs
	t.poolInitial = append([]Sample(nil), r.pools[1:]...)
	t.poolSteps = make([][]poolStep, len(t.Pools)-1)
	for m := range t.peaks {
		t.peaks[m] = Peak{Index: BeforeRecording, Bytes: t.Initial.get(Metric(m))}
	}

	batchLen := st.batchLen(n)
	empty := make(chan placedBatch, st.batches)
	for range st.batches {
		b := placedBatch{
			events: make([]snapshot.Event, batchLen), words: make([]int64, batchLen),
			unpacked: make(chan struct{}, 1),
			left:     new(atomic.Int32), rares: make([][]rareAlloc, len(ps)),
			changes: make([]Sample, batchLen), pools: make([]int32, batchLen),
		}
		if len(ps) > 1 {
			b.routes = make([][]routedEvent, len(ps))
		}
		for m := range b.values {
			b.values[m] = make([]int64, batchLen)
		}
		empty <- b
	}
	toUnpack, unpacking := make(chan placedBatch, st.batches), make(chan placedBatch, st.batches)
	go func() {
		defer close(toUnpack)
		defer close(unpacking)
		for start := 0; start < n; start += batchLen {
			b := <-empty
			b.start, b.events = start, b.events[:min(batchLen, n-start)]
			toUnpack <- b
			unpacking <- b
		}
	}()
	for range st.unpackers {
		go func() {
			for b := range toUnpack {
				r.tr.Events(b.events, b.start)
				b.unpacked <- struct{}{}
			}
		}()
	}
	matched := make([]chan placedBatch, len(ps))
	placed := make(chan placedBatch, st.batches)
	var placing sync.WaitGroup
	for k, p := range ps {
		matched[k] = make(chan placedBatch, st.batches)
		placing.Go(func() { p.place(matched[k], placed) })
	}
	go func() {
		placing.Wait()
		close(placed)
	}()
	opened, recorded := make(chan placedBatch, st.batches), make(chan placedBatch, st.batches)
	var matchCaveats caveatCounter
	if len(ps) > 1 {
		toRoute := make(chan placedBatch, st.batches)
		go r.route(r.layout.clone(-1), toRoute, matched)
		go r.match(int32(initial), &matchCaveats, unpacking, []chan placedBatch{toRoute})
	} else {
		go r.match(int32(initial), &matchCaveats, unpacking, matched)
	}
	go r.open(int32(initial), placed, opened)
	go r.record(opened, recorded)
	summed := make([]chan placedBatch, st.writers)
	var writing sync.WaitGroup
	for w := range summed {
		summed[w] = make(chan placedBatch, st.batches)
		writing.Go(func() { t.write(w, len(summed), summed[w], empty) })
	}
	r.account(recorded, summed)
	writing.Wait()
	counters := []*caveatCounter{&matchCaveats}
	for _, p := range ps {
		counters = append(counters, &p.caveats)
		r.inexact = r.inexact || p.inexact
	}
	r.caveats.mergeRun(counters...)
}

// stages is how many goroutines the forward pass gives the stages it
// splits: the placer's shards (place.go), the matcher's unpackers of the
// events and the writers of the series; and how many batches the stages
// hand on at most at a time.
type stages struct{ shards, unpackers, writers, batches int }

// stagesOn is the forward pass's stages on procs cores. On 16 the
// matcher (unpacking the events), the recorder and the writer each took
// 249-288 ms of CPU time of a 342-392 ms pass on the 996 MB bench file.
// With the unpacking (which needs no order), the fresh records and the
// three series apart, they take 156-197 ms, about as long as the busiest
// of the shards the router feeds (bench/RESULTS.md). Below 8 cores the
// extra goroutines would only take turns on the same cores.
//
// Two batches a core, and at least 8, keep a stage that runs one to fill
// while the next drains another. With 4 on 2 cores the stages waited on
// each other: analyze of the 996 MB bench file on the GPU host's 2 cores
// took longer than with 16 in 13 of 19 pairs over four leases (medians
// 2.31 s against 2.02 in the last; the builds with 4 had the new memory
// limit too, which leaves that file's as it was); with 8 as long as with
// 16 (dev VM, medians 2.63 and 2.62 s, 2.83 with 4). From 8 cores on
// the batches of a smaller trace hold fewer events (batchLen): 16 of
// 8192 were the analysis's peak on the 288 MB bench file (113-117 MiB
// live against 107-108 with 4 or 8, bench/RESULTS.md).
func stagesOn(procs int) stages {
	s := stages{shards: placerShards(procs), unpackers: 1, writers: 1, batches: min(2*max(procs, 4), maxPlacedBatches)}
	if procs >= 8 {
		s.unpackers, s.writers = 2, 3
	}
	return s
}

// The matcher hands the placer, the placer the accountant and so on,
// batches of events (about 110 bytes an event), at most stages.batches at
// a time. They hold a 48th of the trace's events in all (inFlight), at
// least 65536 and at most 131072: on 2 and 4 cores 8 batches, of 8587 for
// the 288 MB bench file and of 16384 for the 996 MB one; 16 from 8 cores
// on, of 4293 and 8192. On the GPU host's 16 cores 16 batches of 8192
// took the 996 MB file's analyze 0.58-0.62 s, 16 of 4096 0.64-0.66 s,
// and the 288 MB file's peaked at 145-146 thousand KiB against 137-140
// with 4096, over half its size, in the same time. On 2 cores the
// stages handed on a batch every 60 us or so, and waited on each other:
// with batches of 16384 instead of 8192 the 996 MB file's forward pass
// left 25-42 core-ms idle instead of 56-187 (dev VM traces), 4-14
// instead of 29-36 on the GPU host (bench/RESULTS.md). placedBatchLen is
// the most a batch holds, a variable for tests to cross batch boundaries
// with few events.
var placedBatchLen = 1 << 14

const (
	inFlightShare = 48
	minInFlight   = 1 << 16
	maxInFlight   = 1 << 17
)

// batchLen is how many events a batch of s holds, for a trace of n
// events.
func (s stages) batchLen(n int) int {
	inFlight := min(max(n/inFlightShare, minInFlight), maxInFlight)
	return min(placedBatchLen, inFlight/s.batches)
}

// maxPlacedBatches is the most batches in flight, on 8 cores or more.
const maxPlacedBatches = 16

// placedBatch is what the stages found for events start.. of one batch,
// with the events, which the matcher unpacks for all (0.24 s of the
// accountant's 0.56 s on the 996 MB bench file went to unpacking them
// again): per event a word, and the allocs whose word could not say
// everything. The matcher's word is, for an alloc, the allocation it ends
// at an address still active (-1: none); for a free, freeWord's (-1: no
// block active at the address). The placer replaces an alloc's with
// placedAlloc's and gives a segment event's its pool index. The
// recorder's changes and pools are each event's change to the usage and
// its pool's index (-1: none), the writers' values each event's
// allocated bytes, waste and active bytes.
type placedBatch struct {
	start  int
	events []snapshot.Event
	// unpacked gets a value once an unpacker has filled events.
	unpacked chan struct{}
	words    []int64
	rare     []rareAlloc
	// left is how many goroutines of a split stage have yet to handle
	// the batch (the stage before it sets it): the placer's shards, then
	// the writers; routes are the
	// events the router gives each shard, rares the shards' rare allocs
	// (place.go).
	left    *atomic.Int32
	routes  [][]routedEvent
	rares   [][]rareAlloc
	changes []Sample
	pools   []int32
	values  [3][]int64
}

// rareAlloc is an alloc whose block size or pool index does not fit its
// word (which is then -1), with the allocation it ended, if its address
// was still active (-1: none).
type rareAlloc struct {
	index int
	size  uint64
	pool  int
	ended int32
}

// placedAlloc is an alloc's word: its block size and pool index, or -1 if
// they do not fit (the batch's rareAlloc has them).
func placedAlloc(size uint64, pool int) int64 {
	if size >= 1<<47 || pool >= 1<<16 {
		return -1
	}
	return int64(size)<<16 | int64(pool)
}

// match is the matcher: it keeps the map of active blocks and sends its
// words in batches, once their events are unpacked. The next traced
// alloc is allocation next.
func (r *replayer) match(next int32, caveats *caveatCounter, unpacking <-chan placedBatch, matched []chan placedBatch) {
	defer func() {
		for _, c := range matched {
			close(c)
		}
	}()
	for b := range unpacking {
		<-b.unpacked
		start := b.start
		b.rare = b.rare[:0]
		b.words = b.words[:len(b.events)]
		for j := range b.events {
			e := &b.events[j]
			w := int64(-1)
			switch e.Action {
			case snapshot.ActionAlloc:
				if old, ok := r.blocks.get(e.Addr); ok {
					// The address is still active: its free was not recorded.
					caveats.add(LayoutConflict, start+j, 0)
					w = int64(old.k)
				}
				r.blocks.set(e.Addr, activeBlock{next, e.Size})
				next++
			case snapshot.ActionFreeRequested:
				w = r.matchFree(start+j, e, !r.hasCompleted, caveats)
			case snapshot.ActionFreeCompleted:
				w = r.matchFree(start+j, e, true, caveats)
			}
			b.words[j] = w
		}
		b.left.Store(int32(len(matched)))
		for _, c := range matched {
			c <- b
		}
	}
}

// matchFree matches a free_requested (ends: false unless the trace
// records no free_completed) or a free_completed (ends: true) with the
// block active at its address: the one that ends the block removes it. It
// returns freeWord's word of the allocation freed, or -1 if no block was
// active at the address.
func (r *replayer) matchFree(i int, e *snapshot.Event, ends bool, caveats *caveatCounter) int64 {
	var b activeBlock
	var ok bool
	if ends {
		b, ok = r.blocks.remove(e.Addr)
	} else {
		b, ok = r.blocks.get(e.Addr)
	}
	if !ok {
		caveats.add(LayoutConflict, i, 0)
		return -1
	}
	return freeWord(b.k, b.requested)
}

// A free's word holds the allocation it frees and that allocation's
// requested size, which the accountant would otherwise read from the
// alloc event, far back in the trace: a cache miss and an unpacking per
// free (0.16 s of the accountant's 0.56 s on the 996 MB bench file). A
// size from 2^31 - 1 bytes up is left for it to read (requestedUnknown).
const requestedUnknown = 1<<31 - 1

func freeWord(k int32, requested uint64) int64 {
	return int64(min(requested, requestedUnknown))<<32 | int64(k)
}

// freed is the allocation and the requested size (or requestedUnknown)
// in a free's word.
func freed(w int64) (k int32, requested uint64) { return int32(w), uint64(w >> 32) }

// open is the recorder's first half: it writes each traced alloc's
// record, records being kept in place, not appended. The next traced
// alloc is allocation next. Apart from record, which ends the records
// and reads them at random, the writes of fresh records kept the
// recorder alone at one whole core on 16 (bench/RESULTS.md).
func (r *replayer) open(next int32, placed <-chan placedBatch, opened chan<- placedBatch) {
	t := r.t
	defer close(opened)
	full := len(t.full) // record appends the full records' Allocations in this order
	for b := range placed {
		rare := b.rare
		// Cut to the batch's length, as in account: no bounds checks.
		n := len(b.words)
		events, changes, pools := b.events[:n], b.changes[:n], b.pools[:n]
		for j, w := range b.words {
			if events[j].Action != snapshot.ActionAlloc {
				continue
			}
			size, pool, _ := allocPlaced(w, &rare)
			rec := newTraced(size, b.start+j, pool, full)
			if rec.full() {
				full++
			} else if w >= 0 {
				// A plain alloc's change to the usage (plainAlloc), which
				// record skips.
				changes[j] = Sample{Allocated: int64(size), Requested: int64(events[j].Size), Active: int64(size)}
				pools[j] = int32(pool)
			}
			t.allocs[next] = rec
			next++
		}
		opened <- b
	}
}

// plainAlloc reports whether an alloc's word w says its block size and
// pool index, and its record is packed: then open notes its change to the
// usage and its pool, and record has nothing to do for it. record, which
// reads each free's record, had held the forward pass back on 16 cores:
// 125-139 ms of CPU time of a 145-158 ms pass on the 996 MB bench file,
// where open took 56-61 (bench/RESULTS.md).
func plainAlloc(w int64) bool {
	return w >= 0 && recordWord(true, uint64(w>>16), int(w&(1<<16-1)), 0)&fullBit == 0
}

// allocPlaced is the block size and pool index an alloc's word w says,
// or those of the next of rare, which it then takes, if w is -1.
func allocPlaced(w int64, rare *[]rareAlloc) (size uint64, pool int, ra *rareAlloc) {
	if w >= 0 {
		return uint64(w >> 16), int(w & (1<<16 - 1)), nil
	}
	ra = &(*rare)[0]
	*rare = (*rare)[1:]
	return ra.size, ra.pool, ra
}

// newTraced is the record of a traced alloc at event i, whose block has
// size bytes in pool.
func newTraced(size uint64, i, pool, nextFull int) allocRecord {
	return allocRecord{start: int32(i), free: LiveAtEnd, end: LiveAtEnd, packed: recordWord(true, size, pool, nextFull)}
}

// record is the recorder's second half: it ends the records at their
// frees, keeps the full records' Allocations, and notes each event's
// change to the usage and its pool's index. open has written the
// records of a batch's allocs before record sees it.
func (r *replayer) record(opened <-chan placedBatch, recorded chan<- placedBatch) {
	t := r.t
	defer close(recorded)
	for b := range opened {
		rare := b.rare
		// Cut to the batch's length, as in account: no bounds checks.
		n := len(b.words)
		events, changes, pools := b.events[:n], b.changes[:n], b.pools[:n]
		for j, w := range b.words {
			i := b.start + j
			e := &events[j]
			var d Sample
			pool := -1
			switch e.Action {
			case snapshot.ActionAlloc:
				if plainAlloc(w) {
					continue // open noted it
				}
				size, p, ra := allocPlaced(w, &rare)
				if ra != nil && ra.ended >= 0 {
					r.endRecord(ra.ended, i, t.requested(&t.allocs[ra.ended]), &d)
				}
				pool = p
				if rec := newTraced(size, i, pool, len(t.full)); rec.full() {
					t.full = append(t.full, Allocation{
						Addr: e.Addr, Size: size, Requested: e.Size, Pool: t.Pools[pool],
						Start: int32(i), Free: LiveAtEnd, End: LiveAtEnd,
						Stack: e.Stack, Stream: e.Stream, Origin: Traced,
					})
				}
				d.Allocated += int64(size)
				d.Requested += int64(e.Size)
				d.Active += int64(size)
			case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
				if w < 0 {
					break
				}
				k, requested := freed(w)
				rec := &t.allocs[k]
				if requested == requestedUnknown {
					requested = t.requested(rec)
				}
				if e.Action == snapshot.ActionFreeCompleted || !r.hasCompleted {
					r.endRecord(k, i, requested, &d)
				} else {
					t.markFreed(rec, i, requested, &d)
				}
				pool = r.recordPool(rec)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
				d.Reserved += int64(e.Size)
				pool = int(w)
			case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
				d.Reserved -= int64(e.Size)
				pool = int(w)
			}
			changes[j], pools[j] = d, int32(pool)
		}
		recorded <- b
	}
}

// account is the accountant: it sums the recorder's changes into the
// usage, the pool steps and the peaks, and hands each batch to the
// writers, which sum the changes into their series' values themselves:
// with their stores here it held the forward pass back on 16 cores as
// the recorder did (bench/RESULTS.md).
func (r *replayer) account(recorded <-chan placedBatch, summed []chan placedBatch) {
	t := r.t
	cur := t.Initial
	peaks := &t.peaks
	for b := range recorded {
		// The batch's slices cut to its length, so that the loads below
		// need no bounds checks (a fifth of the accountant's instructions).
		n := len(b.words)
		pools, changes, events := b.pools[:n], b.changes[:n], b.events[:n]
		for j := range n {
			pool := int(pools[j])
			if pool < 0 {
				continue
			}
			i := b.start + j
			d := changes[j]
			cur.add(d)
			// The default pool is not followed: it is the total minus the
			// private pools.
			if pool > 0 && d != (Sample{}) {
				r.pools[pool].add(d)
				t.poolSteps[pool-1] = append(t.poolSteps[pool-1], poolStep{index: i, Sample: r.pools[pool]})
			}
			if d.Reserved != 0 {
				t.reserved = append(t.reserved, reservedStep{index: int32(i), bytes: cur.Reserved})
			}
			// Only an event that raises a metric can make it peak.
			if d.Allocated > 0 && cur.Allocated > peaks[Allocated].Bytes {
				peaks[Allocated] = Peak{Index: i, TimeUS: events[j].TimeUS, Bytes: cur.Allocated}
			}
			if d.Requested > 0 && cur.Requested > peaks[Requested].Bytes {
				peaks[Requested] = Peak{Index: i, TimeUS: events[j].TimeUS, Bytes: cur.Requested}
			}
			if d.Active > 0 && cur.Active > peaks[Active].Bytes {
				peaks[Active] = Peak{Index: i, TimeUS: events[j].TimeUS, Bytes: cur.Active}
			}
			if d.Reserved > 0 && cur.Reserved > peaks[Reserved].Bytes {
				peaks[Reserved] = Peak{Index: i, TimeUS: events[j].TimeUS, Bytes: cur.Reserved}
			}
		}
		b.left.Store(int32(len(summed)))
		for _, c := range summed {
			c <- b
		}
	}
	for _, c := range summed {
		close(c)
	}
}

// write is writer w of writers: it sums the changes of each batch into
// the values of the series whose index is w modulo writers (allocated
// bytes, waste and active bytes) and codes them; the last writer done
// with a batch hands it back.
func (t *Timeline) write(w, writers int, summed <-chan placedBatch, empty chan<- placedBatch) {
	series := [...]*series{&t.allocated, &t.waste, &t.active}
	cur := [len(series)]int64{t.Initial.Allocated, t.Initial.Allocated - t.Initial.Requested, t.Initial.Active}
	for b := range summed {
		n := len(b.words)
		changes := b.changes[:n]
		for m, s := range series {
			if m%writers != w {
				continue
			}
			values := b.values[m][:n]
			cur[m] = sumInto(values, cur[m], m, changes)
			s.write(b.start, values)
		}
		if b.left.Add(-1) == 0 {
			empty <- b
		}
	}
}

// sumInto sets values to v summed with changes' to series m of write's,
// and returns the last. An event of no pool (-1) changes none of them
// (only a segment's may change the reserved bytes), so they need no look
// at the pools.
func sumInto(values []int64, v int64, m int, changes []Sample) int64 {
	changes = changes[:len(values)]
	switch m {
	case 0:
		for j := range values {
			v += changes[j].Allocated
			values[j] = v
		}
	case 1:
		for j := range values {
			v += changes[j].Allocated - changes[j].Requested
			values[j] = v
		}
	default:
		for j := range values {
			v += changes[j].Active
			values[j] = v
		}
	}
	return v
}

// endRecord ends allocation k, whose requested size is requested, at event
// i: freed if not yet, and no longer active.
func (r *replayer) endRecord(k int32, i int, requested uint64, d *Sample) {
	rec := &r.t.allocs[k]
	r.t.markFreed(rec, i, requested, d)
	rec.end = int32(i)
	d.Active -= int64(r.t.size(rec))
}

// markFreed marks r, whose requested size is requested, freed at event i,
// unless it already was, and takes it out of the allocated and requested
// bytes.
func (t *Timeline) markFreed(r *allocRecord, i int, requested uint64, d *Sample) {
	if r.free == LiveAtEnd {
		r.free = int32(i)
		d.Allocated -= int64(t.size(r))
		d.Requested -= int64(requested)
	}
}

// recordPool is rec's pool index.
func (r *replayer) recordPool(rec *allocRecord) int {
	if rec.full() {
		return r.poolIndex(r.t.full[rec.fullIndex()].Pool)
	}
	return rec.pool()
}

// activeBlock is what the matcher keeps of an active block: its
// allocation and its requested size.
type activeBlock struct {
	k         int32
	requested uint64
}

// compareFinal checks the replayed end state against the final snapshot,
// block by block and in reserved bytes.
func (r *replayer) compareFinal() {
	diff, matched := 0, 0
	for _, fb := range r.finalBlocks {
		b, ok := r.blocks.get(fb.addr)
		if !ok {
			diff++
			continue
		}
		matched++
		a := r.t.Allocation(int(b.k))
		pending := a.Free != LiveAtEnd
		if a.Size != fb.size || a.Requested != fb.requested || pending != (fb.state == snapshot.ActivePendingFree) {
			diff++
		}
	}
	diff += r.blocks.len() - matched // live in the replay only
	if r.layout.segs.total() != r.finalSegs.total() || len(r.layout.segs) != len(r.finalSegs) {
		diff++
	}
	if diff > 0 {
		r.caveats[FinalMismatch].Count = diff
		r.caveats[FinalMismatch].Index = BeforeRecording
	}
}
