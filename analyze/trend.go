package analyze

import (
	"math"

	"github.com/vramscope/vramscope/internal/trend"
)

// fit and growing are internal/trend's statistics with its steadiness
// threshold: the same definitions watch applies online.
func fit(xs []float64, ys []int64) trend.Trend { return trend.Fit(xs, ys) }

func growing(t trend.Trend, min float64) bool { return t.Growing(min, trend.MinSteadiness) }

// round2 keeps two decimals of a ratio for evidence, so that reports stay
// readable and golden files stable.
func round2(v float64) float64 { return math.Round(v*100) / 100 }
