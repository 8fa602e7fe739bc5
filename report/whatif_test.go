package report

import (
	"slices"
	"testing"

	"github.com/vramscope/vramscope/allocsim"
)

func TestBucketed(t *testing.T) {
	// Nine events in buckets starting at 0, 3 and 6. Event 4 frees a
	// segment and allocates another (a release and retry): only the 30
	// it ends with is seen after it.
	pts := []allocsim.Point{{Event: 1, Bytes: 20}, {Event: 4, Bytes: 0}, {Event: 4, Bytes: 30}, {Event: 7, Bytes: 10}}
	for _, tc := range []struct {
		name   string
		res    allocsim.Result
		lo, hi []int64
	}{
		{"whole run", allocsim.Result{Stats: allocsim.Stats{Reserved: pts}}, []int64{0, 20, 10}, []int64{20, 30, 30}},
		{"a late trace starts from what was reserved", allocsim.Result{Stats: allocsim.Stats{Start: 5, Reserved: pts}}, []int64{5, 20, 10}, []int64{20, 30, 30}},
		{"stops at the OOM's bucket", allocsim.Result{Stats: allocsim.Stats{Reserved: pts[:3], OOM: &allocsim.OOM{Event: 5}}}, []int64{0, 20}, []int64{20, 30}},
	} {
		lo, hi := bucketed([]int{0, 3, 6}, 9, &tc.res)
		if !slices.Equal(lo, tc.lo) || !slices.Equal(hi, tc.hi) {
			t.Errorf("%s: min %v max %v, want %v %v", tc.name, lo, hi, tc.lo, tc.hi)
		}
	}
}
