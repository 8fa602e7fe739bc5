package trend

import (
	"math"
	"testing"
)

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// The cases are analyze's: the same series must get the same answers here.
func TestFit(t *testing.T) {
	tests := []struct {
		name       string
		xs         []float64
		ys         []int64
		perStep    float64
		steadiness float64
		growing    bool
	}{
		{"steady leak", []float64{2, 3, 4}, []int64{100, 200, 300}, 100, 1, true},
		{"flat", []float64{2, 3, 4}, []int64{100, 100, 100}, 0, 0, false},
		{"one-off warm-up is not growth", []float64{2, 3, 4}, []int64{0, 100, 100}, 50, 0.67, false},
		{"one-off among more points", []float64{0, 1, 2, 3}, []int64{0, 100, 100, 100}, 100.0 / 6, 0.5, false},
		{"climb with one flat interval", []float64{0, 1, 2, 3}, []int64{0, 100, 100, 300}, 100, 0.83, true},
		{"outlier does not drag the slope", []float64{0, 1, 2, 3, 4}, []int64{0, 10, 1000, 30, 40}, 10, 0.6, false},
		{"falling", []float64{0, 1, 2}, []int64{300, 200, 100}, -100, -1, false},
		{"steps not one apart", []float64{10, 20, 40}, []int64{0, 100, 300}, 10, 1, true},
		{"one point", []float64{1}, []int64{5}, 0, 0, false},
	}
	for _, test := range tests {
		tr := Fit(test.xs, test.ys)
		if math.Abs(tr.PerStep-test.perStep) > 1e-9 || round2(tr.Steadiness) != test.steadiness {
			t.Errorf("%s: slope %v steadiness %v, want %v and %v", test.name, tr.PerStep, round2(tr.Steadiness), test.perStep, test.steadiness)
		}
		if got := tr.Growing(1, MinSteadiness); got != test.growing {
			t.Errorf("%s: growing = %v, want %v", test.name, got, test.growing)
		}
	}
}

// A single jump can never look steady however many points follow it:
// the tau of a step at k among n points is k(n-k)/(n(n-1)/2), at most about
// 0.5, below MinSteadiness.
func TestOneJumpNeverSteady(t *testing.T) {
	for n := 3; n <= 60; n++ {
		for k := 1; k < n; k++ {
			ys := make([]int64, n)
			for i := k; i < n; i++ {
				ys[i] = 1 << 30
			}
			if tau := KendallTau(ys); tau >= MinSteadiness {
				t.Fatalf("jump at %d of %d: tau %.2f >= %.2f", k, n, tau, MinSteadiness)
			}
		}
	}
}

func TestBuckets(t *testing.T) {
	// A saw-tooth of period 4 over 40 samples: its floors are flat.
	var xs []float64
	var ys []int64
	for i := range 40 {
		xs = append(xs, float64(i))
		ys = append(ys, int64(100+50*(i%4)))
	}
	bx, by := Buckets(xs, ys, 10)
	if len(bx) != 10 {
		t.Fatalf("got %d buckets, want 10", len(bx))
	}
	for i, y := range by {
		if y != 100 {
			t.Errorf("bucket %d: floor %d, want 100", i, y)
		}
	}
	if bx[0] != 1.95 || math.Abs(bx[9]-37.05) > 1e-9 {
		t.Errorf("bucket middles %v ... %v, want 1.95 ... 37.05", bx[0], bx[9])
	}
	// Gaps stay gaps: no bucket for an interval without samples.
	bx, _ = Buckets([]float64{0, 1, 9, 10}, []int64{1, 2, 3, 4}, 10)
	if len(bx) != 3 {
		t.Errorf("with a gap: %d buckets %v, want 3", len(bx), bx)
	}
	if bx, by := Buckets([]float64{5}, []int64{7}, 10); len(bx) != 1 || by[0] != 7 {
		t.Errorf("one sample: %v %v", bx, by)
	}
}
