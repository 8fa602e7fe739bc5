package pools

import (
	"math"
	"slices"

	"github.com/vramscope/vramscope/internal/trend"
)

// FloorPoint is what a pool held within one time window at a fixed load:
// the floor of its used tokens at Running requests.
type FloorPoint struct {
	At   float64 // the window's middle
	Used int64
	// Running is the load level the floor is read at (the same for every
	// point of a series).
	Running int
}

// Floor is a series' floors over time, all read at one load level.
type Floor struct {
	Points []FloorPoint
	// Level is the running-request count the points are read at: the
	// lowest the log shows.
	Level int
	// LevelLoad is what Level running requests hold in a healthy pool,
	// extrapolated from the lowest load levels to none; a point's Used
	// minus LevelLoad is what the pool holds with nothing running, which
	// is leaked. -1 when the lowest level is too far from zero to tell.
	LevelLoad int64
}

// floorWindows is how many windows a series is cut into: enough points
// for the trend tests to tell a steady climb from a one-off step, few
// enough that each window holds many samples at each load level.
const floorWindows = 24

// cellQuantile is the share of a cell's samples below its floor: a low
// quantile rather than the least, which would fall with the number of
// samples a cell happens to have (a busy window has few at low load).
const cellQuantile = 0.1

// minCell is the fewest samples a cell's floor is read from.
const minCell = 3

// maxExtrapolate is the highest lowest-level from which what a pool holds
// with nothing running is extrapolated: beyond it the line through the
// levels is too long a reach.
const maxExtrapolate = 2

// Floors estimates the floor of used tokens at a fixed load, per window of
// time. A finished request's tokens go to the evictable cache, which the
// engines' counters leave out, so at a given load a healthy pool holds the
// same however busy it was before and however big its cache grew; tokens
// that are never released raise every later floor.
//
// Load is held equal by comparing like with like over the whole log:
// each window's samples are split by their running-request count into
// cells, a cell's floor is its 10th percentile of used tokens, and the
// cells are fitted as what the window holds apart from its requests plus
// what that many requests hold (cell(w, r) = held(w) + load(r), by
// Tukey's median polish). A busy window then gives its floor at the load
// levels it has, so a leak that happens in busy hours shows in them and
// not only in the next lull. The points are held(w) + load(Level) for the
// lowest level seen.
//
// Where a log prints counts (SGLang's decode lines), lines that print only
// a share are left out: SGLang's prefill line counts the chunked request
// being prefilled in the pool but not among the running requests.
func Floors(samples []Sample) Floor {
	exactOnly := slices.ContainsFunc(samples, func(s Sample) bool { return s.Exact })
	use := func(s Sample) bool { return s.Exact || !exactOnly }
	if len(samples) == 0 {
		return Floor{LevelLoad: -1}
	}
	lo, hi := samples[0].At, samples[len(samples)-1].At
	n := min(floorWindows, max(len(samples)/4, 1))
	width := (hi - lo) / float64(n)
	window := func(x float64) int {
		if width <= 0 {
			return 0
		}
		return min(int((x-lo)/width), n-1)
	}
	// runs are the running-request counts the log shows, the load
	// levels; a level's index is its place among them (a garbled count
	// of millions costs one level, not millions).
	var runs []int32
	for _, s := range samples {
		if use(s) && s.Running >= 0 {
			runs = append(runs, s.Running)
		}
	}
	slices.Sort(runs)
	runs = slices.Compact(runs)
	levels := len(runs)
	if levels == 0 {
		return Floor{LevelLoad: -1}
	}
	// vals[w*levels+r] holds the used tokens of window w at runs[r]
	// requests.
	vals := make([][]int64, n*levels)
	for _, s := range samples {
		if use(s) && s.Running >= 0 {
			r, _ := slices.BinarySearch(runs, s.Running)
			i := window(s.At)*levels + r
			vals[i] = append(vals[i], s.Used)
		}
	}
	cells := make([]float64, n*levels)
	for i, v := range vals {
		cells[i] = math.NaN()
		if len(v) >= minCell {
			slices.Sort(v)
			cells[i] = float64(v[int(cellQuantile*float64(len(v)-1))])
		}
	}
	held, load := polish(cells, n, levels)
	k := slices.IndexFunc(load, func(x float64) bool { return !math.IsNaN(x) })
	if k < 0 {
		return Floor{LevelLoad: -1}
	}
	level := int(runs[k])
	f := Floor{Level: level, LevelLoad: -1}
	for w, h := range held {
		if !math.IsNaN(h) {
			f.Points = append(f.Points, FloorPoint{At: lo + (float64(w)+0.5)*width, Used: int64(math.Round(h + load[k])), Running: level})
		}
	}
	if level <= maxExtrapolate {
		f.LevelLoad = levelLoad(load[k:], runs[k:])
	}
	return f
}

// polish fits cells (n windows × levels, NaN where a cell has too few
// samples) as held[w] + load[r] with Tukey's median polish: medians, not
// means, so that one window's burst of long prompts moves neither effect.
// held is NaN for windows with no cell, load for levels with none.
func polish(cells []float64, n, levels int) (held, load []float64) {
	held, load = make([]float64, n), make([]float64, levels)
	var buf []float64
	med := func(get func(int) float64, m int) float64 {
		buf = buf[:0]
		for i := range m {
			if x := get(i); !math.IsNaN(x) {
				buf = append(buf, x)
			}
		}
		return median(buf)
	}
	for range polishRounds {
		for r := range levels {
			load[r] = med(func(w int) float64 { return cells[w*levels+r] - held[w] }, n)
		}
		for w := range n {
			held[w] = med(func(r int) float64 { return cells[w*levels+r] - load[r] }, levels)
		}
	}
	return held, load
}

// polishRounds is enough for the effects to settle to a token: each round
// moves them by less, and the cells of neighbouring windows overlap in
// load.
const polishRounds = 10

// median of xs, which it sorts; NaN when xs is empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// levelLoad is what the lowest load level, runs[0] running requests,
// holds above none: the line through the lowest levels (Theil-Sen, so
// that one odd level does not tilt it), read there. load[i] is the fitted
// load at runs[i] requests.
func levelLoad(load []float64, runs []int32) int64 {
	if runs[0] == 0 {
		return 0
	}
	var xs []float64
	var ys []int64
	for i := 0; i < len(load) && len(xs) < extrapolateLevels; i++ {
		if !math.IsNaN(load[i]) {
			xs, ys = append(xs, float64(runs[i])), append(ys, int64(math.Round(load[i])))
		}
	}
	if len(xs) < 2 {
		return -1
	}
	slope := trend.TheilSen(xs, ys)
	return max(int64(math.Round(slope*float64(runs[0]))), 0)
}

// extrapolateLevels is how many of the lowest levels the line through
// them is fitted to.
const extrapolateLevels = 6
