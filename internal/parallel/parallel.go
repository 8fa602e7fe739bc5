// Package parallel splits a pass over n items (events, allocations) into
// consecutive ranges, one per core, and runs them at once. Callers keep a
// result per range and merge the results in range order, so what they
// compute does not depend on the number of cores.
package parallel

import (
	"runtime"
	"sync"
)

// Ranges cuts [0, n) into consecutive ranges of at least minLen items
// (one range if n is smaller), at most one per core. Range p is
// [bounds[p], bounds[p+1]).
func Ranges(n, minLen int) (bounds []int) { return RangesOn(n, minLen, runtime.GOMAXPROCS(0)) }

// RangesOn is Ranges on at most cores cores: a pass that runs beside
// another leaves it the rest.
func RangesOn(n, minLen, cores int) (bounds []int) {
	parts := max(1, min(cores, n/max(minLen, 1)))
	bounds = make([]int, parts+1)
	for p := range bounds {
		bounds[p] = p * n / parts
	}
	return bounds
}

// Do runs f on each range of bounds (from Ranges), the last on the
// calling goroutine, and returns when all are done.
func Do(bounds []int, f func(part, lo, hi int)) {
	var wg sync.WaitGroup
	last := len(bounds) - 2
	for p := range last {
		wg.Go(func() { f(p, bounds[p], bounds[p+1]) })
	}
	if last >= 0 {
		f(last, bounds[last], bounds[last+1])
	}
	wg.Wait()
}
