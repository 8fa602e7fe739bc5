package pools

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/vramscope/vramscope/internal/trend"
)

// Leak is a pool that loses slots: its floor at low load climbs steadily,
// or the engine's idle check found slots nobody holds.
type Leak struct {
	Engine Engine
	// Pool is the engine's name for it: "token_to_kv_pool",
	// "req_to_token_pool", vLLM's "kv_cache".
	Pool string
	Rank string
	Unit string
	// Capacity is the pool's size in Unit.
	Capacity int64
	// Leaked is the estimate at the end of the log: the last floor above
	// the first; exact when Idle is set.
	Leaked int64
	// Idle is the engine's own count, when its idle check failed.
	Idle *IdleCheck
	// Trend is the fit of Floors over hours (over lines when the log has
	// no time stamps); nil when the floors are too few or do not climb.
	Trend *trend.Trend
	// Stepped is set when the floor is not steady enough for the trend
	// test but stepped up and stayed (judgeSeries).
	Stepped bool
	Floors  []FloorPoint
	// Level is the running-request count the floors are read at.
	Level int
	// Onset is when the floor left its baseline, in the log's seconds
	// (OnsetTime when the log has dates).
	Onset     float64
	OnsetTime time.Time
	// RequestsPerMinute is the admission rate in the hour around the
	// onset, from prefill lines; negative when the log has none.
	RequestsPerMinute float64
	// HoursLeft is when the floor reaches the capacity at the fitted
	// rate; negative when unknown.
	HoursLeft float64
}

// minFloors is the fewest floors a trend is fitted to: with fewer, one
// busy window decides.
const minFloors = 6

// minLeakShare is the least growth over the log, as a share of the pool,
// that counts: a few pages more at the end of a day is noise of the load
// level, not a leak worth a finding.
const minLeakShare = 0.005

// Judge returns the leaks of a log's pools, one per rank whose floor
// climbs, and one per pool its idle checks name. notes say why a series
// was not judged.
func Judge(l *Log) (leaks []Leak, notes []string) {
	for _, sr := range l.Series {
		if lk, ok := judgeSeries(l, sr.Rank, sr.Samples); ok {
			leaks = append(leaks, lk)
		}
	}
	for _, c := range l.Idle {
		if c.Leaked <= 0 {
			continue
		}
		c := c
		i := slices.IndexFunc(leaks, func(lk Leak) bool { return lk.Pool == c.Pool && lk.Idle == nil })
		if i < 0 {
			leaks = append(leaks, Leak{Engine: SGLang, Pool: c.Pool, Unit: unitOf(c.Pool), Capacity: c.Capacity,
				Onset: c.At, RequestsPerMinute: -1, HoursLeft: -1})
			i = len(leaks) - 1
		}
		leaks[i].Idle, leaks[i].Leaked = &c, c.Leaked
		if leaks[i].Trend == nil {
			leaks[i].Onset = c.At
		}
	}
	if n := l.NumSamples(); n > 0 && len(leaks) == 0 && n < 4*minFloors {
		notes = append(notes, "too few pool stats lines for a trend")
	}
	for i := range leaks {
		if l.HasTime {
			leaks[i].OnsetTime = l.Start.Add(time.Duration(leaks[i].Onset * float64(time.Second)))
		}
	}
	sortLeaks(leaks)
	return leaks, notes
}

func unitOf(pool string) string {
	if pool == "req_to_token_pool" {
		return "request slots"
	}
	return "tokens"
}

// judgeSeries judges one rank's floors (Floors holds load equal). A pool
// leaks when its floor
//
//   - climbs steadily, by the trend tests memory uses (Kendall tau of at
//     least trend.MinSteadiness) and by more than minLeakShare of the pool;
//   - or steps up and never comes back: every later floor stays above the
//     floors before the step by that much. A healthy pool returns to its
//     floor in every lull; a leak that happens in busy hours rises in
//     steps that stay. A step within the first warmupShare of the log is
//     not taken on its own: it may be a warm-up.
//
// The estimate of what leaked is what the last floor holds with nothing
// running, where the lowest load level is near enough to none to tell
// (Floor.LevelLoad); otherwise the floor's rise over the log, extended by
// its slope to the log's first and last moments.
func judgeSeries(l *Log, rank string, ss []Sample) (Leak, bool) {
	fl := Floors(ss)
	pts := fl.Points
	if len(pts) < minFloors {
		return Leak{}, false
	}
	scale := 1.0 // x in hours, or in lines
	if l.HasTime {
		scale = 3600
	}
	xs := make([]float64, len(pts))
	ys := make([]int64, len(pts))
	for i, p := range pts {
		xs[i], ys[i] = p.At/scale, p.Used
	}
	span := xs[len(xs)-1] - xs[0]
	size := l.poolSize()
	minGrowth := max(minLeakShare*float64(size), 2*resolution(l, ss))
	tr := trend.Fit(xs, ys)
	step := stepUp(ys, minGrowth)
	steady := span > 0 && tr.Growing(minGrowth/span, trend.MinSteadiness)
	if !steady && (span <= 0 || step < 0) {
		return Leak{}, false
	}
	pool := "token_to_kv_pool"
	if l.Engine == VLLM {
		pool = "kv_cache"
	}
	last := len(ys) - 1
	lk := Leak{
		Engine: l.Engine, Pool: pool, Rank: rank, Unit: l.Unit(), Capacity: size,
		Trend: &tr, Stepped: !steady, Floors: pts, Level: fl.Level, RequestsPerMinute: -1, HoursLeft: -1,
	}
	perX := max(tr.PerStep, 0)
	if step >= 0 && perX == 0 {
		// Steps between flat stretches: the mean rate over the log.
		perX = float64(ys[last]-ys[0]) / span
	}
	if fl.LevelLoad >= 0 {
		lk.Leaked = max(ys[last]-fl.LevelLoad, 0)
	} else {
		// The first and last points stand for their windows' middles.
		first, end := ss[0].At/scale, ss[len(ss)-1].At/scale
		lk.Leaked = max(ys[last]-ys[0]+int64(math.Round(perX*(xs[0]-first+end-xs[last]))), 0)
	}
	// The onset: after the last floor still within a tenth of the growth
	// of the baseline, which is what Level requests hold where that is
	// known: a pool that holds more from the first floor on leaked before.
	base := slices.Min(ys[:max(len(ys)/4, 1)])
	if fl.LevelLoad >= 0 {
		base = fl.LevelLoad
	}
	margin := max(resolution(l, ss), 0.1*float64(ys[last]-base))
	j := -1
	for i, y := range ys {
		if float64(y-base) <= margin {
			j = i
		}
	}
	lk.Onset = pts[min(j+1, last)].At
	if l.HasTime {
		lk.RequestsPerMinute = admissionRate(ss, lk.Onset)
		if perX > 0 {
			lk.HoursLeft = float64(size-lk.Leaked) / perX
		}
	}
	return lk, true
}

// warmupShare is the start of a log in which a step of the floor may be a
// warm-up.
const warmupShare = 1.0 / 8

// minAfterStep is the fewest floors that must stay up after a step: the
// last window alone could be one busy moment.
const minAfterStep = 2

// stepUp returns the first floor from which every later floor stays at
// least by above the median of the floors before it, or -1.
func stepUp(ys []int64, by float64) int {
	rest := make([]int64, len(ys)) // rest[k] is the least of ys[k:]
	rest[len(ys)-1] = ys[len(ys)-1]
	for k := len(ys) - 2; k >= 0; k-- {
		rest[k] = min(ys[k], rest[k+1])
	}
	before := make([]float64, 0, len(ys))
	for k := range len(ys) - minAfterStep + 1 {
		if k > 0 {
			before = append(before, float64(ys[k-1]))
		}
		if float64(k) < warmupShare*float64(len(ys)) {
			continue
		}
		if float64(rest[k])-median(slices.Clone(before)) >= by {
			return k
		}
	}
	return -1
}

// resolution is the smallest change the series can show: one token for
// printed counts, the rounding of a printed share otherwise.
func resolution(l *Log, ss []Sample) float64 {
	if !slices.ContainsFunc(ss, func(s Sample) bool { return !s.Exact }) {
		return 1
	}
	if l.Engine == VLLM {
		return float64(l.poolSize()) / 1000
	}
	return float64(l.poolSize()) / 100
}

// admissionRate is the requests admitted per minute in the hour around
// at, from prefill lines' #new-seq; -1 when the series has none.
func admissionRate(ss []Sample, at float64) float64 {
	if !slices.ContainsFunc(ss, func(s Sample) bool { return s.Admitted > 0 }) {
		return -1
	}
	lo := max(at-1800, ss[0].At)
	hi := min(at+1800, ss[len(ss)-1].At)
	if hi <= lo {
		return -1
	}
	n := 0
	for _, s := range ss {
		if s.At >= lo && s.At <= hi {
			n += int(s.Admitted)
		}
	}
	return math.Round(float64(n)/((hi-lo)/60)*100) / 100
}

// sortLeaks orders leaks by share of the pool lost.
func sortLeaks(ls []Leak) {
	slices.SortStableFunc(ls, func(a, b Leak) int {
		return cmp.Compare(float64(b.Leaked)/float64(max(b.Capacity, 1)), float64(a.Leaked)/float64(max(a.Capacity, 1)))
	})
}
