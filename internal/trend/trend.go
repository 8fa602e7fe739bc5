// Package trend holds the statistics that tell steady growth from a
// warm-up jump and from noise: a Theil-Sen slope, Kendall's tau and the
// steadiness threshold between them. analyze applies them to snapshots
// taken step by step; watch applies the same definitions online, to a
// sliding window of samples reduced to a bounded number of points.
package trend

import (
	"slices"
)

// TheilSen is the median of the slopes between every pair of points with
// different x: a straight-line fit that one outlier (a snapshot dumped in
// the middle of a forward pass, a log row taken at a peak) cannot drag.
// It returns 0 for fewer than two distinct xs. It costs O(n²): callers
// with long series reduce them first (see Buckets).
func TheilSen(xs []float64, ys []int64) float64 {
	slopes := make([]float64, 0, len(xs)*(len(xs)-1)/2)
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

// KendallTau measures how steadily ys rises in order: +1 when every later
// point is above every earlier one, 0 for no trend, -1 for a steady fall;
// ties count as neither. A one-off step (0, X, X) scores 0.67 and a one-off
// step among more points less (at most about 0.5 for a long series), while
// a steady climb with one flat interval (a, a+d, a+d, a+3d) scores 0.83, so
// a threshold between them tells growth from warm-up.
func KendallTau(ys []int64) float64 {
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

// MinSteadiness is the Kendall tau above which a series counts as growing
// steadily; see KendallTau for why 0.7.
const MinSteadiness = 0.7

// Trend is a series' fit and how steady its growth is.
type Trend struct {
	PerStep    float64 // Theil-Sen slope per unit of x
	Steadiness float64 // Kendall tau
	First      int64
	Last       int64
}

// Fit fits ys over xs; both hold at least one point and have equal length.
func Fit(xs []float64, ys []int64) Trend {
	return Trend{PerStep: TheilSen(xs, ys), Steadiness: KendallTau(ys), First: ys[0], Last: ys[len(ys)-1]}
}

// Growing reports whether the series climbs by at least min per unit of x,
// with a steadiness of at least steadiness, and ends above where it
// started. analyze passes MinSteadiness.
func (t Trend) Growing(min, steadiness float64) bool {
	return t.PerStep >= min && t.Steadiness >= steadiness && t.Last > t.First
}

// Buckets reduces a long series, sorted by x, to at most n points: the span
// of xs is cut into n equal intervals and each interval that holds samples
// gives one point, at its middle, whose y is the smallest sample in it.
// The minimum is the floor a process's memory returns to between its peaks,
// so a saw-tooth (allocate, free, allocate) reduces to a flat line while
// memory that is never given back raises every later floor. It bounds the
// O(n²) of TheilSen and KendallTau at O(n²) of the bucket count whatever
// the sampling rate.
func Buckets(xs []float64, ys []int64, n int) (bx []float64, by []int64) {
	if len(xs) == 0 || n <= 0 {
		return nil, nil
	}
	lo, hi := xs[0], xs[len(xs)-1]
	if hi <= lo || n == 1 {
		return []float64{lo}, []int64{slices.Min(ys)}
	}
	width := (hi - lo) / float64(n)
	cur := -1
	for i, x := range xs {
		b := min(int((x-lo)/width), n-1)
		if b != cur {
			cur = b
			bx = append(bx, lo+(float64(b)+0.5)*width)
			by = append(by, ys[i])
			continue
		}
		by[len(by)-1] = min(by[len(by)-1], ys[i])
	}
	return bx, by
}
