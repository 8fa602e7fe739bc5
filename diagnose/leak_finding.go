package diagnose

import (
	"fmt"

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
// first.
func (r *LeakReport) Findings() []Finding {
	out := []Finding{}
	for i := range r.Sites {
		if s := &r.Sites[i]; s.Leak {
			out = append(out, r.finding(s))
		}
	}
	return out
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
