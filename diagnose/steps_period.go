package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/snapshot"
)

// minPeriodConfidence is the share of repeating allocations that must fit
// a period for it to count as the program's iterations. The loops of the
// fixtures fit 0.6 (a serving loop with few allocations per step) to 0.98
// (a training loop); a single pass over a model stays below (peak_upcast:
// 0.43).
const minPeriodConfidence = 0.6

// Candidates tried: the most common repeat counts, and for each the sites
// of that count that first occur earliest (the first of them usually opens
// the loop body; the others cover a setup site that happens to repeat
// equally often).
const (
	periodCounts  = 3
	periodAnchors = 8
)

// periodSite identifies an allocation site for period detection: its
// stack, or its size when the allocation has no stack.
type periodSite struct {
	stack snapshot.StackID
	size  uint64
}

// allocSeq is a trace's allocations as a sequence of dense site ids.
type allocSeq struct {
	// Sites are numbered in order of first occurrence.
	site  []int32 // per allocation
	event []int32 // per allocation: its event index
	// Per site: occurrences, the positions (in site) of the first and
	// last, and the stack.
	count       []int
	first, last []int
	stacks      []snapshot.StackID
}

// newAllocSeq numbers the sites of tr's allocations. A stack's site is
// found by the stack's id, in a slice; a size's (the empty stacks') in a
// map: with a map for both, the 4.8 M allocations of the 999 MB
// generate() shape took 0.24 s, a third of the steps' time.
func newAllocSeq(tr snapshot.Trace) *allocSeq {
	var byStack []int32 // 1 + a stack's site; 0: not met yet
	bySize := map[periodSite]int32{}
	s := &allocSeq{}
	var actions [snapshot.EventsBlock]snapshot.Action
	var stacks [snapshot.EventsBlock]snapshot.StackID
	var sizes [snapshot.EventsBlock]uint64
	for start := 0; start < tr.Len(); start += len(actions) {
		n := tr.Columns(snapshot.Columns{Actions: actions[:], Stacks: stacks[:], Sizes: sizes[:]}, start)
		for j, act := range actions[:n] {
			if act != snapshot.ActionAlloc {
				continue
			}
			stack := stacks[j]
			var id int32
			var ok bool
			sized := stack == snapshot.NoStack || stack == snapshot.EmptyStack
			if sized {
				id, ok = bySize[periodSite{stack, sizes[j]}]
			} else {
				if k := int(stack); k >= len(byStack) {
					byStack = append(byStack, make([]int32, k+1-len(byStack))...)
				}
				id, ok = byStack[stack]-1, byStack[stack] != 0
			}
			if !ok {
				id = int32(len(s.count))
				if sized {
					bySize[periodSite{stack, sizes[j]}] = id
				} else {
					byStack[stack] = id + 1
				}
				s.count = append(s.count, 0)
				s.first = append(s.first, len(s.site))
				s.last = append(s.last, 0)
				s.stacks = append(s.stacks, stack)
			}
			s.count[id]++
			s.last[id] = len(s.site)
			s.site = append(s.site, id)
			s.event = append(s.event, int32(start+j))
		}
	}
	return s
}

// period is a candidate split of the trace: cut at every allocation of
// site anchor, which occurs n times.
type period struct {
	anchor, n int
	// score is the share of repeating allocations whose site fits: it
	// occurs equally often in every period, none before the first.
	score float64
	fits  []bool // per site
}

// stepsFromPeriod infers steps from the repeating pattern of allocation
// sites: in a loop run n times, most sites of the body allocate n times (or
// a multiple of n), once per iteration. The candidate period is anchored at
// a site allocating exactly n times, and scored by the share of repeating
// allocations (of sites allocating twice or more) whose site occurs equally
// often in every period it cuts. Weighing by allocations rather than sites
// keeps a few setup sites that repeat (weights of several layers) from
// outvoting a loop body. A loop that turns out to run inside one forward or
// backward pass (the layers of a model) is no step, and the next best
// candidate is tried.
func stepsFromPeriod(sn *snapshot.Snapshot, tr snapshot.Trace, f *callsite.Filter) Steps {
	s := newAllocSeq(tr)
	var cands []period
	for _, n := range s.commonCounts() {
		anchors := 0
		// Site ids are numbered in order of first occurrence.
		for a := range s.count {
			if s.count[a] != n {
				continue
			}
			cands = append(cands, period{anchor: a, n: n})
			if anchors++; anchors == periodAnchors {
				break
			}
		}
	}
	// Each candidate is a pass over every allocation: they are scored on
	// every core (24 passes over the 4.8 M allocations of the generate()
	// shape took 0.53 s on one).
	parallel.Do(parallel.Ranges(len(cands), 1), func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			cands[c] = s.period(cands[c].anchor, cands[c].n)
		}
	})
	// Best first; among equals, the earliest tried.
	slices.SortStableFunc(cands, func(a, b period) int { return cmp.Compare(b.score, a.score) })
	var layers string // why the best candidate inside one pass is no step
	for _, c := range cands {
		if c.score < minPeriodConfidence {
			break
		}
		if why, inner := s.insidePass(sn, c, f); inner {
			if layers == "" {
				layers = why
			}
			continue
		}
		return s.steps(sn, tr, f, c)
	}
	if layers != "" {
		return Steps{Steps: []Step{}, Reason: layers, OnePass: true}
	}
	best := period{}
	if len(cands) > 0 {
		best = cands[0]
	}
	return Steps{Steps: []Step{}, Confidence: best.score, Reason: fmt.Sprintf(
		"no repeating allocation pattern (best candidate: %d periods fitting %.0f%% of repeating allocations, %.0f%% needed)",
		best.n, 100*best.score, 100*minPeriodConfidence)}
}

// steps cuts tr at every allocation of c's anchor.
func (s *allocSeq) steps(sn *snapshot.Snapshot, tr snapshot.Trace, f *callsite.Filter, c period) Steps {
	var starts []int
	for p, site := range s.site {
		if int(site) == c.anchor {
			starts = append(starts, int(s.event[p]))
		}
	}
	steps := make([]Step, len(starts))
	for k, first := range starts {
		end := tr.Len()
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		start, stop := spanTimes(tr, first, end)
		steps[k] = Step{Label: fmt.Sprintf("period %d", k+1), Source: SourcePeriodicity, First: first, End: end, StartUS: start, EndUS: stop}
	}
	marker := f.Site(sn, s.stacks[c.anchor]).String()
	return Steps{
		Steps: steps, Source: SourcePeriodicity, Marker: marker, Confidence: c.score,
		Reason: fmt.Sprintf("%d periods, each opened by the allocation at %s; %.0f%% of repeating allocations come from sites that occur equally often in every period",
			len(steps), marker, 100*c.score),
	}
}

// commonCounts returns the repeat counts (2 or more) shared by the most
// sites, most common first.
func (s *allocSeq) commonCounts() []int {
	sites := map[int]int{}
	for _, c := range s.count {
		if c >= 2 {
			sites[c]++
		}
	}
	counts := make([]int, 0, len(sites))
	for c := range sites {
		counts = append(counts, c)
	}
	slices.SortFunc(counts, func(a, b int) int {
		return cmp.Or(cmp.Compare(sites[b], sites[a]), cmp.Compare(a, b))
	})
	return counts[:min(len(counts), periodCounts)]
}

// period cuts the sequence at every occurrence of site anchor (n of them)
// and scores the cut: the share of repeating allocations whose site's
// count is a multiple m*n with exactly m occurrences in every period, none
// before the first.
func (s *allocSeq) period(anchor, n int) period {
	// per is how many times a site whose count is a multiple of n must
	// occur in each period (0: its count is not), so that the pass over
	// the allocations divides nothing.
	per := make([]int, len(s.count))
	for site, c := range s.count {
		if c%n == 0 {
			per[site] = c / n
		}
	}
	seen := make([]int, len(s.count))
	bad := make([]bool, len(s.count))
	p := -1
	for _, site := range s.site {
		if int(site) == anchor {
			p++
		}
		m := per[site]
		if m == 0 {
			continue
		}
		// Its k-th occurrence (from 0) belongs in period k/m.
		if k := seen[site]; k < p*m || k >= (p+1)*m {
			bad[site] = true
		}
		seen[site]++
	}
	fits := make([]bool, len(s.count))
	repeating, fit := 0, 0
	for site, c := range s.count {
		if c < 2 {
			continue
		}
		repeating += c
		if per[site] != 0 && !bad[site] {
			fits[site] = true
			fit += c
		}
	}
	return period{anchor: anchor, n: n, score: float64(fit) / float64(repeating), fits: fits}
}
