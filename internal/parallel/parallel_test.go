package parallel

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
)

func TestRanges(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, c := range []struct {
		n, minLen int
		want      []int
	}{
		{0, 10, []int{0, 0}},
		{5, 10, []int{0, 5}},
		{25, 10, []int{0, 12, 25}},
		{100, 10, []int{0, 25, 50, 75, 100}},
		{100, 0, []int{0, 25, 50, 75, 100}},
	} {
		if got := Ranges(c.n, c.minLen); !slices.Equal(got, c.want) {
			t.Errorf("Ranges(%d, %d) = %v, want %v", c.n, c.minLen, got, c.want)
		}
	}
	// On fewer cores than GOMAXPROCS: as many ranges as cores at most.
	if got, want := RangesOn(100, 10, 2), []int{0, 50, 100}; !slices.Equal(got, want) {
		t.Errorf("RangesOn(100, 10, 2) = %v, want %v", got, want)
	}
	if got, want := RangesOn(100, 10, 0), []int{0, 100}; !slices.Equal(got, want) {
		t.Errorf("RangesOn(100, 10, 0) = %v, want %v", got, want)
	}
}

// Every item is visited once, by the range that holds it.
func TestDo(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	bounds := Ranges(1000, 7)
	seen := make([]atomic.Int32, 1000)
	parts := make([]int, 1000)
	Do(bounds, func(part, lo, hi int) {
		for i := lo; i < hi; i++ {
			seen[i].Add(1)
			parts[i] = part
		}
	})
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("item %d visited %d times", i, n)
		}
		if p := parts[i]; i < bounds[p] || i >= bounds[p+1] {
			t.Fatalf("item %d visited by part %d, [%d, %d)", i, p, bounds[p], bounds[p+1])
		}
	}
}
