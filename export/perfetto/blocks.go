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
	idx := largest(t.Allocations, pw.opt.Largest)
	spans := make([]span, 0, len(idx))
	for _, k := range idx {
		a := &t.Allocations[k]
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

// largest returns the indices of the n largest allocations, the earlier
// of equal ones first. It keeps a min-heap of the n best so far, so a
// trace of millions of blocks is read once, in order, instead of sorted.
func largest(allocs []replay.Allocation, n int) []int {
	h := &rankHeap{allocs: allocs}
	for k := range allocs {
		switch {
		case len(h.idx) < n:
			heap.Push(h, k)
		case n > 0 && h.above(k, h.idx[0]):
			h.idx[0] = k
			heap.Fix(h, 0)
		}
	}
	slices.SortFunc(h.idx, func(a, b int) int {
		switch {
		case h.above(a, b):
			return -1
		case h.above(b, a):
			return 1
		}
		return 0
	})
	return h.idx
}

// rankHeap is a min-heap of allocation indices by rank.
type rankHeap struct {
	allocs []replay.Allocation
	idx    []int
}

// above reports whether allocation a ranks above b: larger, or as large
// and earlier.
func (h *rankHeap) above(a, b int) bool {
	sa, sb := h.allocs[a].Size, h.allocs[b].Size
	return sa > sb || sa == sb && a < b
}

func (h *rankHeap) Len() int           { return len(h.idx) }
func (h *rankHeap) Less(i, j int) bool { return h.above(h.idx[j], h.idx[i]) }
func (h *rankHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *rankHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }

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
