package perfetto

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
)

// blockArgs are a block slice's args.
type blockArgs struct {
	Bytes        uint64   `json:"bytes"`
	Requested    uint64   `json:"requested_bytes"`
	Stream       string   `json:"stream"`
	Pool         string   `json:"pool"`
	Origin       string   `json:"origin"`
	UserMetadata string   `json:"user_metadata,omitempty"`
	Stack        []string `json:"stack"`
}

// span is one complete event waiting for its lane.
type span struct {
	start, end int64
	ev         event
}

// blocks writes t's opt.Largest largest allocations as complete events
// from alloc (or the first event, for blocks older than the trace) to
// free_completed (or the last event, for blocks still live).
func (pw *processWriter) blocks(t *replay.Timeline) {
	idx := largest(t.NumAllocations(), pw.opt.Largest, func(k int) uint64 { return t.Allocation(k).Size })
	spans := make([]span, 0, len(idx))
	for _, k := range idx {
		a := t.Allocation(k)
		start, end := pw.clk.at(t, int(a.Start)), pw.clk.at(t, int(a.End))
		end = max(end, start) // a clock that stepped back
		args := blockArgs{
			Bytes: a.Size, Requested: a.Requested,
			Stream: fmt.Sprintf("%#x", uint64(pw.sn.Stream(a.Stream))),
			Pool:   a.Pool.String(), Origin: a.Origin.String(),
			Stack: pw.stackSummary(a.Stack),
		}
		where := pw.site(a.Stack)
		switch a.Origin {
		case replay.Traced:
			args.UserMetadata = pw.sn.String(t.Trace.Context(int(a.Start)).UserMetadata)
		case replay.FromFree:
			// Its stack is the free's: the args keep it, the name must not
			// blame the code that released the block.
			where = "before recording"
		}
		name := units.Bytes(a.Size).String() + " " + where
		spans = append(spans, span{start, end, event{Name: name, Cat: "block", Ph: "X", PID: pw.pid, Args: args}})
	}
	pw.spans(device(t)+" blocks", spans)
}

// largest returns the indices of the n largest of count allocations, whose
// sizes size gives, the earlier of equal ones first. It keeps a min-heap of
// the n best so far, so a trace of millions of blocks is read once, in
// order, instead of sorted.
func largest(count, n int, size func(k int) uint64) []int {
	if n <= 0 {
		return nil
	}
	h := &rankHeap{}
	for k := range count {
		r := ranked{k, size(k)}
		switch {
		case len(h.items) < n:
			heap.Push(h, r)
		case r.above(h.items[0]):
			h.items[0] = r
			heap.Fix(h, 0)
		}
	}
	slices.SortFunc(h.items, func(a, b ranked) int {
		switch {
		case a.above(b):
			return -1
		case b.above(a):
			return 1
		}
		return 0
	})
	idx := make([]int, len(h.items))
	for i, r := range h.items {
		idx[i] = r.k
	}
	return idx
}

// ranked is an allocation's index and size.
type ranked struct {
	k    int
	size uint64
}

// above reports whether a ranks above b: larger, or as large and earlier.
func (a ranked) above(b ranked) bool {
	return a.size > b.size || a.size == b.size && a.k < b.k
}

// rankHeap is a min-heap of allocations by rank.
type rankHeap struct{ items []ranked }

func (h *rankHeap) Len() int           { return len(h.items) }
func (h *rankHeap) Less(i, j int) bool { return h.items[j].above(h.items[i]) }
func (h *rankHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *rankHeap) Push(x any)         { h.items = append(h.items, x.(ranked)) }

// Pop is never called: the heap only grows to n, then its root is replaced.
func (h *rankHeap) Pop() any { panic("rankHeap.Pop") }

// spans writes complete events on as few threads named prefix, prefix 2,
// … as nest properly.
func (pw *processWriter) spans(prefix string, spans []span) {
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	var ls lanes
	var tids []int
	for i := range spans {
		s := &spans[i]
		k := ls.place(s.start, s.end)
		if k == len(tids) {
			name := prefix
			if k > 0 {
				name = fmt.Sprintf("%s %d", prefix, k+1)
			}
			tids = append(tids, pw.thread(name))
		}
		dur := s.end - s.start
		s.ev.TS, s.ev.Dur, s.ev.TID = s.start, &dur, tids[k]
		pw.ew.emit(&s.ev)
	}
}
