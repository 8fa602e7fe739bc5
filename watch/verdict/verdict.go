// Package verdict judges one process's memory over a sliding window with
// the statistics analyze uses between snapshots (internal/trend): steady
// growth is a leak, a jump followed by a plateau is a warm-up, a flat or
// saw-toothed series is steady.
//
// NVML reports what a process holds on the device (for PyTorch: the
// caching allocator's reserved memory plus the CUDA context), sampled
// every second or so. The window is cut into Buckets intervals and each
// gives its floor (the smallest sample), so peaks of a saw-tooth that go
// back down do not count, and the O(n²) statistics run on at most Buckets
// points whatever the sampling rate.
package verdict

import (
	"fmt"
	"slices"
	"time"

	"github.com/vramscope/vramscope/internal/trend"
)

// Verdict is the one-word state of a process's memory.
type Verdict string

const (
	// Pending: the process has not been watched for a whole window yet.
	Pending Verdict = "pending"
	// Steady: flat, noisy or saw-toothed, no net growth.
	Steady Verdict = "steady"
	// Warmup: it ends on a plateau higher than where the window began
	// (by as much as a leak would grow over the window), without growing
	// steadily or lately: a jump, or a leak that stopped.
	Warmup Verdict = "warmup"
	// Leak: it grows steadily and is still growing.
	Leak Verdict = "leak"
)

// Verdicts lists every verdict, in order of concern.
var Verdicts = []Verdict{Pending, Steady, Warmup, Leak}

// Config holds the thresholds; each is a flag of vramscope watch.
type Config struct {
	// Window is how much history a verdict looks at.
	Window time.Duration
	// MinRate is the slowest growth, in bytes per minute, that counts as a
	// leak.
	MinRate float64
	// Steadiness is the Kendall tau of the window's floors above which
	// growth counts as steady (trend.MinSteadiness, as analyze).
	Steadiness float64
	// Buckets is how many floors a window is reduced to.
	Buckets int
}

// DefaultConfig is watch's default: ten minutes, 1 MiB per minute,
// analyze's steadiness, 30 floors of 20 s.
var DefaultConfig = Config{Window: 10 * time.Minute, MinRate: 1 << 20, Steadiness: trend.MinSteadiness, Buckets: 30}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("window %v: want a positive duration", c.Window)
	case c.MinRate <= 0:
		return fmt.Errorf("minimum rate %v bytes per minute: want more than 0", c.MinRate)
	case c.Steadiness <= 0 || c.Steadiness > 1:
		return fmt.Errorf("steadiness %v: want a Kendall tau in (0, 1]", c.Steadiness)
	case c.Buckets < 3:
		return fmt.Errorf("buckets %d: want at least 3", c.Buckets)
	}
	return nil
}

// Result is a window's verdict and the figures behind it.
type Result struct {
	Verdict Verdict `json:"verdict"`
	// BytesPerMinute is the Theil-Sen slope of the floors; 0 until the
	// window holds two floors.
	BytesPerMinute float64 `json:"bytes_per_minute"`
	// Steadiness is the floors' Kendall tau.
	Steadiness float64 `json:"steadiness"`
	// Span is the time the window's samples cover.
	Span time.Duration `json:"span_ns"`
}

// Window holds one process's samples over the last Config.Window.
type Window struct {
	cfg    Config
	origin int64     // unix milliseconds of the first sample ever added
	times  []int64   // unix milliseconds, rising
	mins   []float64 // the same times in minutes since origin
	bytes  []int64
}

// NewWindow returns an empty window judged by cfg.
func NewWindow(cfg Config) *Window { return &Window{cfg: cfg} }

// Add appends a sample; samples older than the window fall out. A sample
// not later than the last one is dropped (a clock step back).
func (w *Window) Add(t time.Time, used uint64) {
	ms := t.UnixMilli()
	if n := len(w.times); n > 0 && ms <= w.times[n-1] {
		return
	}
	if len(w.times) == 0 && w.mins == nil {
		w.origin = ms
	}
	w.times = append(w.times, ms)
	w.mins = append(w.mins, float64(ms-w.origin)/60e3)
	w.bytes = append(w.bytes, int64(used))
	cut := ms - w.cfg.Window.Milliseconds()
	i := 0
	for i < len(w.times) && w.times[i] < cut {
		i++
	}
	if i > 0 {
		// Drop in place once the dropped part is as long as what is
		// kept, so the slices stay within twice the window and appends
		// stay amortized O(1).
		w.times, w.mins, w.bytes = w.times[i:], w.mins[i:], w.bytes[i:]
		if cap(w.times) > 2*len(w.times)+64 {
			w.times, w.mins, w.bytes = slices.Clone(w.times), slices.Clone(w.mins), slices.Clone(w.bytes)
		}
	}
}

// Samples returns copies of the window's sample times (unix
// milliseconds) and values.
func (w *Window) Samples() (times, values []int64) {
	return slices.Clone(w.times), slices.Clone(w.bytes)
}

// Len is the number of samples in the window.
func (w *Window) Len() int { return len(w.times) }

// Judge returns the window's verdict.
func (w *Window) Judge() Result {
	if len(w.times) < 2 {
		return Result{Verdict: Pending}
	}
	span := time.Duration(w.times[len(w.times)-1]-w.times[0]) * time.Millisecond
	bx, by := trend.Buckets(w.mins, w.bytes, w.cfg.Buckets)
	tr := trend.Fit(bx, by)
	r := Result{BytesPerMinute: tr.PerStep, Steadiness: tr.Steadiness, Span: span}
	// A window is full once it spans all but one bucket: samples arrive
	// at intervals, so the span never quite reaches Window.
	if span < w.cfg.Window-w.cfg.Window/time.Duration(w.cfg.Buckets) {
		r.Verdict = Pending
		return r
	}
	switch {
	case tr.Growing(w.cfg.MinRate, w.cfg.Steadiness) && newHigh(by):
		r.Verdict = Leak
	case raised(by, w.cfg.MinRate*w.cfg.Window.Minutes()):
		r.Verdict = Warmup
	default:
		r.Verdict = Steady
	}
	return r
}

// raised reports whether every floor of the last third is at least by
// above every floor of the first: a plateau higher than where the window
// began, which noise and saw-tooths, whose floors mix, do not make.
func raised(floors []int64, by float64) bool {
	k := max(len(floors)/3, 1)
	if 2*k > len(floors) {
		return false
	}
	return float64(slices.Min(floors[len(floors)-k:])-slices.Max(floors[:k])) >= by
}

// newHigh reports whether the last third of the floors rises above
// everything before it: growth that stopped a third of a window ago
// (the end of a warm-up in several steps) is no longer a leak.
func newHigh(floors []int64) bool {
	k := len(floors) - max(len(floors)/3, 1)
	if k <= 0 {
		return false
	}
	return slices.Max(floors[k:]) > slices.Max(floors[:k])
}
