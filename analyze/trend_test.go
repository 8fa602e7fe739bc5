package analyze

import (
	"math"
	"testing"
)

func TestTrend(t *testing.T) {
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
		tr := fit(test.xs, test.ys)
		if math.Abs(tr.PerStep-test.perStep) > 1e-9 || round2(tr.Steadiness) != test.steadiness {
			t.Errorf("%s: slope %v steadiness %v, want %v and %v", test.name, tr.PerStep, round2(tr.Steadiness), test.perStep, test.steadiness)
		}
		if got := tr.growing(1); got != test.growing {
			t.Errorf("%s: growing = %v, want %v", test.name, got, test.growing)
		}
	}
}
