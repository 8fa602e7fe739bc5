package analyze

import (
	"math"
	"slices"
)

// theilSen is the median of the slopes between every pair of points with
// different x: a straight-line fit that one outlier (a snapshot dumped in
// the middle of a forward pass, a log row taken at a peak) cannot drag.
// It returns 0 for fewer than two distinct xs.
func theilSen(xs []float64, ys []int64) float64 {
	var slopes []float64
	for i := range xs {
		for j := i + 1; j < len(xs); j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, float64(ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	slices.Sort(slopes)
	m := len(slopes) / 2
	if len(slopes)%2 == 1 {
		return slopes[m]
	}
	return (slopes[m-1] + slopes[m]) / 2
}

// kendallTau measures how steadily ys rises in order: +1 when every later
// point is above every earlier one, 0 for no trend, -1 for a steady fall;
// ties count as neither. A one-off step (0, X, X) scores 0.67 and a one-off
// step among more points less, while a steady climb with one flat interval
// (a, a+d, a+d, a+3d) scores 0.83, so a threshold between them tells
// growth from warm-up.
func kendallTau(ys []int64) float64 {
	pairs, s := 0, 0
	for i := range ys {
		for j := i + 1; j < len(ys); j++ {
			pairs++
			switch {
			case ys[j] > ys[i]:
				s++
			case ys[j] < ys[i]:
				s--
			}
		}
	}
	if pairs == 0 {
		return 0
	}
	return float64(s) / float64(pairs)
}

// minSteadiness is the Kendall tau above which a series counts as growing
// steadily; see kendallTau for why 0.7.
const minSteadiness = 0.7

// trend is a series' fit and how steady its growth is.
type trend struct {
	PerStep    float64 // Theil-Sen slope per unit of x
	Steadiness float64 // Kendall tau
	First      int64
	Last       int64
}

func fit(xs []float64, ys []int64) trend {
	return trend{PerStep: theilSen(xs, ys), Steadiness: kendallTau(ys), First: ys[0], Last: ys[len(ys)-1]}
}

// growing reports whether the series climbs by at least min per step,
// steadily, and ends above where it started.
func (t trend) growing(min float64) bool {
	return t.PerStep >= min && t.Steadiness >= minSteadiness && t.Last > t.First
}

// round2 keeps two decimals of a ratio for evidence, so that reports stay
// readable and golden files stable.
func round2(v float64) float64 { return math.Round(v*100) / 100 }
