package breakdown

import (
	"cmp"
	"slices"
	"sort"

	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// By is what a table groups blocks by.
type By string

const (
	ByCategory By = "category"
	ByModule   By = "module"
	ByCallsite By = "callsite"
	// ByRule groups by the rule that decided and its evidence: why the
	// bytes got their categories.
	ByRule By = "rule"
)

// Row is one group of a table: the allocated bytes (block sizes, as
// torch's allocated_bytes counts them) of its blocks at the table's moment.
type Row struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	Blocks int    `json:"blocks"`
	// Category is the row's category where all its blocks share one
	// (always, for a ByCategory table); "" when mixed.
	Category Category `json:"category,omitempty"`
}

// Table is the memory at one moment, grouped.
type Table struct {
	// Index is the event right after which the blocks are counted
	// (replay.BeforeRecording: the start).
	Index int `json:"event"`
	By    By  `json:"by"`
	// Total is Σ Rows' bytes: the allocated bytes at Index.
	Total int64 `json:"total_bytes"`
	// Rows: for ByCategory every category of Breakdown.Categories in
	// order, zeros included; otherwise the groups, largest first.
	Rows []Row `json:"rows"`
}

// Bytes returns the bytes of the row named name (0 if none).
func (t Table) Bytes(name string) int64 {
	for _, r := range t.Rows {
		if r.Name == name {
			return r.Bytes
		}
	}
	return 0
}

// Table returns the blocks allocated right after event i, grouped by by.
func (b *Breakdown) Table(i int, by By) Table { return b.table(i, b.tl.AllocatedAt(i), by) }

// table is Table of the blocks allocated right after event i, allocated.
func (b *Breakdown) table(i int, allocated []int, by By) Table {
	t := Table{Index: i, By: by}
	rows := map[string]*Row{}
	var order []string
	if by == ByCategory {
		for _, c := range b.categories {
			rows[string(c)] = &Row{Name: string(c), Category: c}
			order = append(order, string(c))
		}
	}
	for _, k := range allocated {
		a := b.tl.Allocation(k)
		l := b.labels[b.of[k]]
		name := b.groupName(by, &a, l)
		r := rows[name]
		if r == nil {
			r = &Row{Name: name, Category: l.Category}
			rows[name] = r
			order = append(order, name)
		}
		if r.Category != l.Category {
			r.Category = ""
		}
		r.Bytes += int64(a.Size)
		r.Blocks++
		t.Total += int64(a.Size)
	}
	for _, n := range order {
		t.Rows = append(t.Rows, *rows[n])
	}
	if by != ByCategory {
		slices.SortStableFunc(t.Rows, func(x, y Row) int { return cmp.Compare(y.Bytes, x.Bytes) })
	}
	return t
}

// groupName is the row a block falls in.
func (b *Breakdown) groupName(by By, a *replay.Allocation, l Label) string {
	switch by {
	case ByModule:
		if l.Module != "" {
			return l.Module
		}
		return "(" + string(l.Category) + ")"
	case ByCallsite:
		return b.site(a)
	case ByRule:
		return l.Rule + ": " + l.Evidence
	}
	return string(l.Category)
}

// site names where a block was allocated: its user callsite, or the
// backward() call whose engine allocated it.
func (b *Breakdown) site(a *replay.Allocation) string {
	if a.Start >= 0 && (a.Stack == snapshot.EmptyStack || a.Stack == snapshot.NoStack) {
		if call := b.scan.During(int(a.Start), a.Stack); call != nil {
			return call.String()
		}
	}
	if s, ok := b.sites[a.Stack]; ok {
		return s
	}
	s := b.filter.Site(b.sn, a.Stack).String()
	b.sites[a.Stack] = s
	return s
}

// Point is the bytes of each category at one event of a series.
type Point struct {
	Index  int     `json:"event"`
	TimeUS int64   `json:"time_us"`
	Bytes  []int64 `json:"bytes"` // per Series.Names
}

// Series is a stacked-area timeline: per point, the bytes of each group.
type Series struct {
	By     By       `json:"by"`
	Names  []string `json:"names"`
	Points []Point  `json:"points"`
}

// Series samples the timeline at about n points, each the event of its
// bucket where the allocated total is highest (so no spike is lost), and
// gives each point's bytes by category (ByCategory) or by module
// (ByModule: the top modules by peak bytes, the rest in "(other)").
func (b *Breakdown) Series(n int, by By, top int) Series {
	tl := b.tl
	events := tl.Len()
	s := Series{By: by}
	// group of each label, by index into s.Names
	group := make([]int, len(b.labels))
	switch by {
	case ByModule:
		peak := b.Table(tl.Peak(replay.Allocated).Index, ByModule)
		idx := map[string]int{}
		for _, r := range peak.Rows {
			if len(s.Names) == top {
				break
			}
			idx[r.Name] = len(s.Names)
			s.Names = append(s.Names, r.Name)
		}
		other := len(s.Names)
		s.Names = append(s.Names, "(other)")
		for k, l := range b.labels {
			name := l.Module
			if name == "" {
				name = "(" + string(l.Category) + ")"
			}
			if g, ok := idx[name]; ok {
				group[k] = g
			} else {
				group[k] = other
			}
		}
	default:
		s.By = ByCategory
		for _, c := range b.categories {
			s.Names = append(s.Names, string(c))
		}
		group = b.categoryGroups()
	}
	if events == 0 || n <= 0 {
		return s
	}
	n = min(n, events)
	var at []int
	for bk := range n {
		at = append(at, peakAt(tl, bk*events/n, (bk+1)*events/n))
	}
	for k, bytes := range b.sweep(at, spans(tl, at), group, len(s.Names)) {
		s.Points = append(s.Points, Point{Index: at[k], TimeUS: tl.Trace.At(at[k]).TimeUS, Bytes: bytes})
	}
	return s
}

// span is an allocation a sweep counts at moments lo to hi-1 of its
// events.
type span struct{ k, lo, hi int32 }

// spans are the allocations of tl allocated right after at least one of
// the events at (ascending), with the moments that count them, in
// allocation order. A block counts at the moments from its alloc up to
// before its free_requested, which are a range of at. One pass over the
// allocations, in ranges on every core; most blocks are freed before the
// next moment, and so are not spans.
func spans(tl *replay.Timeline, at []int) []span {
	bounds := parallel.Ranges(tl.NumAllocations(), rangeLen)
	parts := make([][]span, len(bounds)-1)
	parallel.Do(bounds, func(p, first, last int) {
		lo := 0
		for k := first; k < last; k++ {
			start, free, _ := tl.Lifetime(k)
			// Allocations come by start: the first moment at or after it
			// only moves on, and past the last one no block counts.
			for lo < len(at) && at[lo] < start {
				lo++
			}
			if lo == len(at) {
				break
			}
			if at[lo] >= free {
				continue
			}
			hi := lo + sort.SearchInts(at[lo:], free)
			parts[p] = append(parts[p], span{int32(k), int32(lo), int32(hi)})
		}
	})
	return slices.Concat(parts...)
}

// allocatedAt are the blocks of live (spans) allocated right after its
// j-th moment, ascending: Timeline.AllocatedAt of that event.
func allocatedAt(live []span, j int) []int {
	var out []int
	for _, s := range live {
		if int(s.lo) <= j && j < int(s.hi) {
			out = append(out, int(s.k))
		}
	}
	return out
}

// sweep returns, for each event of at (ascending), the allocated bytes of
// each of n groups right after it, group[l] being label l's group, from
// the blocks live there, live (spans(b.tl, at)). Each block adds its size
// where its range of moments starts and takes it off where it ends, in an
// array of moments, not of events (one of 11 M events on the 996 MB bench
// file cost 1 s of page faults and cache misses). The pass runs in ranges
// on every core, each with an array of its own, summed after.
func (b *Breakdown) sweep(at []int, live []span, group []int, n int) [][]int64 {
	bounds := parallel.Ranges(len(live), rangeLen)
	diffs := make([][][]int64, len(bounds)-1)
	parallel.Do(bounds, func(part, first, last int) {
		diff := make([][]int64, len(at)+1)
		for j := range diff {
			diff[j] = make([]int64, n)
		}
		for _, s := range live[first:last] {
			g, size := group[b.of[s.k]], int64(b.tl.Allocation(int(s.k)).Size)
			diff[s.lo][g] += size
			diff[s.hi][g] -= size
		}
		diffs[part] = diff
	})
	out := make([][]int64, len(at))
	cur := make([]int64, n)
	for j := range at {
		for _, diff := range diffs {
			for g, d := range diff[j] {
				cur[g] += d
			}
		}
		out[j] = slices.Clone(cur)
	}
	return out
}

// ActiveAt returns the labels of the blocks active (allocated or pending
// free) right after event i, by address: what an export of that moment's
// blocks labels them with.
func (b *Breakdown) ActiveAt(i int) map[uint64]Label {
	out := map[uint64]Label{}
	for _, k := range b.tl.LiveAt(i) {
		out[b.tl.Allocation(k).Addr] = b.labels[b.of[k]]
	}
	return out
}

// siteCategories are the bytes of the blocks allocated (ascending) by user
// callsite (the frame's String) and category.
func (b *Breakdown) siteCategories(allocated []int) map[string]map[Category]int64 {
	out := map[string]map[Category]int64{}
	keys := map[snapshot.StackID]string{} // "" for a stack without a user frame
	for _, k := range allocated {
		a := b.tl.Allocation(k)
		key, ok := keys[a.Stack]
		if !ok {
			if site := b.filter.Site(b.sn, a.Stack); site.Known() {
				key = site.Frame.String()
			}
			keys[a.Stack] = key
		}
		if key == "" {
			continue
		}
		if out[key] == nil {
			out[key] = map[Category]int64{}
		}
		out[key][b.labels[b.of[k]].Category] += int64(a.Size)
	}
	return out
}
