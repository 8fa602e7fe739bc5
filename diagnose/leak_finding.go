package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/callsite"

	"github.com/vramscope/vramscope/internal/units"
)

// Severity bounds for leaks.
const (
	// minMediumLeak: below 1 MiB per step a leak takes a long run to
	// matter (loss scalars kept in a list grow by 512 B per step); it is
	// still reported, as Low.
	minMediumLeak = 1 << 20
	// maxHighSpread: a leak of (nearly) the same size in every step is one
	// object per step, the clearest case.
	maxHighSpread = 0.1
)

// Findings returns one leak finding per leaking callsite, largest growth
// first. The places of one callsite (the lines below it that allocated)
// are measured apart and reported together, each with its share, and
// with the cause they show together (LeakCause).
func (r *LeakReport) Findings() []Finding {
	out := []Finding{}
	var order []string
	parts := map[string][]*SiteGrowth{}
	for i := range r.Sites {
		s := &r.Sites[i]
		if !s.Leak {
			continue
		}
		k := s.key
		if s.Site.Known() && s.Backward == nil {
			k = s.Site.Key()
		}
		if parts[k] == nil {
			order = append(order, k)
		}
		parts[k] = append(parts[k], s)
	}
	for _, k := range order {
		out = append(out, r.callsiteFinding(parts[k]))
	}
	slices.SortStableFunc(out, func(a, b Finding) int { return cmp.Compare(b.BytesPerStep, a.BytesPerStep) })
	return out
}

// callsiteFinding is the finding of one callsite's leaking places, the
// largest first.
func (r *LeakReport) callsiteFinding(places []*SiteGrowth) Finding {
	slices.SortStableFunc(places, func(a, b *SiteGrowth) int { return cmp.Compare(b.PerStep, a.PerStep) })
	lp := make([]LeakPart, len(places))
	for i, s := range places {
		lp[i] = LeakPart{Origin: s.Origin, PerStep: s.PerStep}
	}
	if len(places) == 1 {
		fd := r.finding(places[0])
		LeakCause(lp).apply(&fd)
		return fd
	}
	sum := *places[0]
	sum.Live, sum.Requested, sum.Born = slices.Clone(sum.Live), slices.Clone(sum.Requested), slices.Clone(sum.Born)
	rows := []string{}
	for i, s := range places {
		if i > 0 {
			addTo(sum.Live, s.Live)
			addTo(sum.Requested, s.Requested)
			addTo(sum.Born, s.Born)
			sum.AtEnd += s.AtEnd
		}
		rows = append(rows, fmt.Sprintf("%s per step from %s", units.Bytes(s.PerStep), s.Place))
	}
	sum.Growth = judge(sum.Live, sum.Requested)
	sum.Leak = true // each place leaks; together they do
	largest := places[0].Origin
	sum.Origin = callsite.Origin{} // several lines below the callsite: the title names the callsite
	fd := r.finding(&sum)
	if largest.Below(sum.Site) {
		o := NewFrame(largest.Frame)
		fd.Origin, fd.AllocatedVia = &o, NewStack(largest.Via)
	}
	if largest.Below(sum.Site) {
		fd.Title += "; " + AllocatedIn(largest, len(places)-1)
	}
	fd.Evidence["origins"] = rows
	LeakCause(lp).apply(&fd)
	return fd
}

// addTo adds b to a element-wise.
func addTo(a, b []int64) {
	for i := range min(len(a), len(b)) {
		a[i] += b[i]
	}
}

// finding describes one leaking site with the numbers that make the case:
// the live bytes at every step boundary, how many steps grew and how
// steadily.
func (r *LeakReport) finding(s *SiteGrowth) Finding {
	sev := Medium
	switch {
	case s.PerStep < minMediumLeak:
		sev = Low
	case s.Grew == s.Later && s.Spread <= maxHighSpread:
		sev = High
	}
	steps := r.Steps.Steps
	fd := Finding{
		Kind:     KindLeak,
		Severity: sev,
		Title: fmt.Sprintf("%s more stays allocated after every step from %s (%d of %d steps grew)",
			units.Bytes(s.PerStep), s.Place, s.Grew, s.Later),
		Bytes:        s.AtEnd,
		BytesPerStep: s.PerStep,
		Device:       r.Device,
		Evidence: map[string]any{
			"steps":                        len(steps),
			"first_and_last_step":          steps[0].Label + " .. " + steps[len(steps)-1].Label,
			"step_source":                  string(r.Steps.Source),
			"step_marker":                  r.Steps.Marker,
			"step_confidence":              r.Steps.Confidence,
			"live_bytes_per_step":          s.Live,
			"growth_bytes_per_step":        diffs(s.Live),
			"born_bytes_per_step":          s.Born,
			"requested_bytes_per_step":     s.RequestedPerStep,
			"first_step_bytes":             s.FirstStep,
			"grew_steps":                   s.Grew,
			"judged_steps":                 s.Later,
			"grew_fraction":                float64(s.Grew) / float64(s.Later),
			"relative_spread":              s.Spread,
			"shrink_bytes":                 s.Shrink,
			"device_allocated_bytes":       r.Allocated,
			"device_growth_bytes_per_step": median(diffs(r.Allocated[1:])),
		},
		Fix: leakFix(s),
	}
	placeFinding(&fd, s.Place, s.Stack)
	return fd
}

// leakFix says what to change: the snapshot shows where the tensors were
// made, never who holds them, so the advice points at where the result
// goes (the caller in the user stack) and names the usual holders.
func leakFix(s *SiteGrowth) string {
	where := ""
	if len(s.Stack) >= 2 {
		where = fmt.Sprintf(" (its caller %s)", s.Stack[1])
	}
	return fmt.Sprintf("%s allocates %s per step that is never freed: a reference outlives the step. "+
		"Follow where its result goes%s and release the reference once it has been used: "+
		"a list, queue, dict cache, closure or object attribute that keeps it alive (set it to None, pop it, or bound the cache). "+
		"At this rate 1000 more steps hold another %s.",
		s.Place, units.Bytes(s.PerStep), where, units.Bytes(1000*s.PerStep))
}
