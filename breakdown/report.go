package breakdown

import (
	"fmt"
	"slices"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// maxStepSummaries bounds Report.Steps: a long trace has thousands of
// steps, and the first and last ones tell how memory settled and grew.
const maxStepSummaries = 100

// Report is one device's category totals at the moments analyze and
// explain print: the allocated peak, the end of the trace and each step.
type Report struct {
	Device int     `json:"device"`
	Peak   Summary `json:"peak"`
	End    Summary `json:"end"`
	// Steps are taken at each step's allocated peak; with more than 100
	// steps, the first and last 50 (StepsOmitted counts the rest).
	Steps        []Summary `json:"steps"`
	StepsOmitted int       `json:"steps_omitted,omitempty"`
	// GrowthPerStep is each category's change per step from the end of the
	// first step to the end of the last; absent with fewer than two steps.
	GrowthPerStep map[Category]int64 `json:"growth_per_step,omitempty"`
	peak          Table
	// endSites are the bytes allocated at the end by callsite (as
	// Frame.String names it) and category: what a leak's line holds.
	endSites map[string]map[Category]int64
}

// moments are the moments a Report sums at: the peak, the end and the
// steps' peaks it keeps (ats), then the ends of the first and the last
// step where there are two or more (ends).
type moments struct {
	ats     []At
	ends    []int
	omitted int // the steps' peaks left out
	steps   int // how many steps there are
}

func reportMoments(tl *replay.Timeline, steps diagnose.Steps) moments {
	m := moments{steps: len(steps.Steps)}
	peaks := StepPeaks(tl, steps)
	if len(peaks) > maxStepSummaries {
		m.omitted = len(peaks) - maxStepSummaries
		peaks = append(peaks[:maxStepSummaries/2], peaks[len(peaks)-maxStepSummaries/2:]...)
	}
	m.ats = append([]At{Peak(tl), End(tl)}, peaks...)
	if m.steps >= 2 {
		m.ends = []int{steps.Steps[0].End - 1, steps.Steps[m.steps-1].End - 1}
	}
	return m
}

// events are the moments' events: the ats', then the ends.
func (m moments) events() []int {
	events := make([]int, 0, len(m.ats)+len(m.ends))
	for _, a := range m.ats {
		events = append(events, a.Event)
	}
	return append(events, m.ends...)
}

// Report is the device's category totals at the moments analyze and
// explain print: the allocated peak, the end of the trace and each step,
// as Classify(tl) labels the blocks. It labels only the blocks those
// moments count, those allocated right after one of them: 6,568 of the
// 996 MB bench file's 3.8 M allocations at its 104 moments, where
// labelling every one took 0.21 s of one core's 2.6 s analyze. With the
// user's rules it labels every block, since their categories are listed
// where any block has one.
func (ev *Events) Report(tl *replay.Timeline, steps diagnose.Steps) Report {
	m := reportMoments(tl, steps)
	at, order := ascending(m.events())
	live := spans(tl, at)
	var only []int32
	if len(ev.opts.Rules) == 0 {
		only = make([]int32, len(live))
		for j, s := range live {
			only[j] = s.k
		}
	}
	b := ev.classify(tl, only)
	// The peak's and the end's blocks are among the spans: no pass over
	// every allocation finds them again.
	return b.report(m, b.sums(at, order, live), allocatedAt(live, order[0]), allocatedAt(live, order[1]))
}

// report is the Report of b's totals sums at the moments m, whose peak and
// end have the blocks atPeak and atEnd allocated (ascending).
func (b *Breakdown) report(m moments, sums [][]int64, atPeak, atEnd []int) Report {
	r := Report{Device: b.Device, Steps: []Summary{}, StepsOmitted: m.omitted}
	r.peak = b.table(m.ats[0].Event, atPeak, ByCategory)
	r.endSites = b.siteCategories(atEnd)
	r.Peak, r.End = b.summary(m.ats[0], sums[0]), b.summary(m.ats[1], sums[1])
	for k, a := range m.ats[2:] {
		r.Steps = append(r.Steps, b.summary(a, sums[2+k]))
	}
	if len(m.ends) == 2 {
		first, last := sums[len(sums)-2], sums[len(sums)-1]
		r.GrowthPerStep = map[Category]int64{}
		for k, c := range b.categories {
			r.GrowthPerStep[c] = (last[k] - first[k]) / int64(m.steps-1)
		}
	}
	return r
}

// summaries are the category totals right after each of events, in any
// order.
func (b *Breakdown) summaries(events []int) [][]int64 {
	at, order := ascending(events)
	return b.sums(at, order, spans(b.tl, at))
}

// ascending returns events sorted, and where each of events went: events[k]
// is at[order[k]].
func ascending(events []int) (at, order []int) {
	byEvent := make([]int, len(events))
	for k := range byEvent {
		byEvent[k] = k
	}
	slices.SortFunc(byEvent, func(x, y int) int { return events[x] - events[y] })
	at, order = make([]int, len(events)), make([]int, len(events))
	for j, k := range byEvent {
		at[j], order[k] = events[k], j
	}
	return at, order
}

// sums are the category totals at the events whose ascending order is at,
// live their spans (spans), given back in the order ascending took them
// from.
func (b *Breakdown) sums(at, order []int, live []span) [][]int64 {
	swept := b.sweep(at, live, b.categoryGroups(), len(b.categories))
	out := make([][]int64, len(order))
	for k, j := range order {
		out[k] = swept[j]
	}
	return out
}

// categoryGroups maps each label to its category's index in b.categories.
func (b *Breakdown) categoryGroups() []int {
	group := make([]int, len(b.labels))
	for l, lab := range b.labels {
		group[l] = slices.Index(b.categories, lab.Category)
	}
	return group
}

func (b *Breakdown) summary(a At, bytes []int64) Summary {
	s := Summary{Device: b.Device, At: a, Categories: make(map[Category]int64, len(bytes))}
	for k, c := range b.categories {
		s.Categories[c] = bytes[k]
		s.TotalBytes += bytes[k]
	}
	return s
}

// MadeOf is the peak's largest categories for a sentence: "3.9 GiB of
// activation and 1.1 GiB of optimizer state".
func (r Report) MadeOf() string { return Describe(r.peak, 3) }

// Growing is the category that grew most per step, and by how much; ""
// when none grew.
func (r Report) Growing() (Category, int64) {
	var best Category
	var most int64
	for _, c := range builtin {
		if g := r.GrowthPerStep[c]; g > most {
			best, most = c, g
		}
	}
	for c, g := range r.GrowthPerStep {
		if !c.Builtin() && g > most {
			best, most = c, g
		}
	}
	return best, most
}

// Annotate adds to the device's findings what their memory is made of: a
// peak finding the categories at the peak ("made_of", and
// "category_bytes" for JSON), a leak finding the category that grows. A
// finding that already says it keeps its own.
func (r Report) Annotate(fs []diagnose.Finding) {
	for i := range fs {
		f := &fs[i]
		if f.Device != r.Device {
			continue
		}
		if f.Evidence == nil {
			f.Evidence = map[string]any{}
		}
		_, made := f.Evidence["made_of"]
		_, growing := f.Evidence["growing_category"]
		switch f.Kind {
		case diagnose.KindPeak:
			if m := r.MadeOf(); m != "" && !made {
				f.Evidence["made_of"] = "the peak is " + m
				f.Evidence["category_bytes"] = r.Peak.Categories
			}
		case diagnose.KindLeak:
			if growing {
				continue
			}
			// Saying that unknown memory grows tells nothing.
			if c, n := r.siteCategory(f.Callsite); c != "" && c != Unknown {
				f.Evidence["growing_category"] = fmt.Sprintf("%s (%s of it allocated at the end from this line)", c.Title(), units.Bytes(n))
			} else if c, g := r.Growing(); c != "" && c != Unknown {
				f.Evidence["growing_category"] = fmt.Sprintf("%s, +%s per step on this device", c.Title(), units.Bytes(g))
			}
		}
	}
}

// siteCategory is the category holding the most bytes at the end among
// the blocks of callsite fr, and those bytes; "" when none is known.
func (r Report) siteCategory(fr *diagnose.Frame) (Category, int64) {
	if fr == nil {
		return "", 0
	}
	key := snapshot.Frame{Name: fr.Function, Filename: fr.File, Line: fr.Line}.String()
	var best Category
	var most int64
	for c, n := range r.endSites[key] {
		if n > most || n == most && c < best {
			best, most = c, n
		}
	}
	return best, most
}
