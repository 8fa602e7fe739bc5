package pools

import (
	"slices"
)

// FloorPoint is the least a pool's use fell to within one time window,
// among the moments of lowest load.
type FloorPoint struct {
	At   float64 // the window's middle
	Used int64
	// Running is the load level the floor was read at (the same for every
	// point of a series).
	Running int
}

// floorWindows is how many windows a series is cut into: enough points
// for the trend tests to tell a steady climb from a one-off step, few
// enough that each window sees a quiet moment.
const floorWindows = 24

// Floors estimates the floor of used tokens at low load, per window of
// time. A finished request's tokens go to the evictable cache, which the
// engines' counters leave out, so at a given load a healthy pool returns
// to the same floor however busy it was before and however big its cache
// grew; tokens that are never released raise every later floor.
//
// Load must be held equal for the floors to compare: each window's
// lowest running-request count is taken, the level is the 25th percentile
// of those minima (a level that at least a quarter of the windows reach),
// and a window's floor is the least use among its samples at or below the
// level. Windows that never get that quiet are left out: a busy afternoon
// has no floor to give.
//
// Where a log prints counts (SGLang's decode lines), lines that print only
// a share are left out: SGLang's prefill line counts the chunked request
// being prefilled in the pool but not among the running requests.
func Floors(samples []Sample) (pts []FloorPoint, level int) {
	exactOnly := slices.ContainsFunc(samples, func(s Sample) bool { return s.Exact })
	use := func(s Sample) bool { return s.Exact || !exactOnly }
	if len(samples) == 0 {
		return nil, 0
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
	minRun := make([]int, n)
	for i := range minRun {
		minRun[i] = -1
	}
	for _, s := range samples {
		w := window(s.At)
		if use(s) && (minRun[w] < 0 || s.Running < minRun[w]) {
			minRun[w] = s.Running
		}
	}
	seen := slices.DeleteFunc(slices.Clone(minRun), func(r int) bool { return r < 0 })
	slices.Sort(seen)
	level = seen[len(seen)/4]
	floor := make([]int64, n)
	for i := range floor {
		floor[i] = -1
	}
	for _, s := range samples {
		if w := window(s.At); use(s) && s.Running <= level && (floor[w] < 0 || s.Used < floor[w]) {
			floor[w] = s.Used
		}
	}
	for w, f := range floor {
		if f >= 0 {
			pts = append(pts, FloorPoint{At: lo + (float64(w)+0.5)*width, Used: f, Running: level})
		}
	}
	return pts, level
}
