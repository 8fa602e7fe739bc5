package verdict

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const MiB = 1 << 20

var t0 = time.Unix(1_700_000_000, 0)

// run samples series once a second for d and judges the window every
// 10 s. It returns every verdict with its time, and when Leak was first
// seen (-1: never).
type judged struct {
	at time.Duration
	Result
}

func run(cfg Config, d time.Duration, series func(s float64) float64) (out []judged, firstLeak time.Duration) {
	w := NewWindow(cfg)
	firstLeak = -1
	for s := time.Duration(0); s <= d; s += time.Second {
		w.Add(t0.Add(s), uint64(max(series(s.Seconds()), 0)))
		if s%(10*time.Second) != 0 {
			continue
		}
		r := w.Judge()
		out = append(out, judged{s, r})
		if r.Verdict == Leak && firstLeak < 0 {
			firstLeak = s
		}
	}
	return out, firstLeak
}

func count(js []judged, v Verdict) int {
	n := 0
	for _, j := range js {
		if j.Verdict == v {
			n++
		}
	}
	return n
}

// leak grows rate bytes a minute, in steps of step bytes (the caching
// allocator takes memory from the device a segment at a time), from base.
func leak(base, rate, step float64) func(float64) float64 {
	return func(s float64) float64 { return base + step*math.Floor(rate*s/60/step) }
}

func TestLeakFlaggedWithinAWindow(t *testing.T) {
	cfg := DefaultConfig
	tests := []struct {
		name   string
		series func(float64) float64
	}{
		{"38 MiB/min in 2 MiB blocks", leak(4096*MiB, 38*MiB, 2*MiB)},
		{"38 MiB/min in 20 MiB segments", leak(4096*MiB, 38*MiB, 20*MiB)},
		{"4 MiB/min in 2 MiB blocks", leak(4096*MiB, 4*MiB, 2*MiB)},
		{"38 MiB/min after a 10 GiB warm-up", func(s float64) float64 {
			if s < 30 {
				return 1024 * MiB
			}
			return leak(11*1024*MiB, 38*MiB, 20*MiB)(s - 30)
		}},
		{"38 MiB/min with a 2 GiB saw-tooth on top", func(s float64) float64 {
			return leak(4096*MiB, 38*MiB, 2*MiB)(s) + float64(int(s)%7)*300*MiB
		}},
	}
	for _, test := range tests {
		js, first := run(cfg, 30*time.Minute, test.series)
		// The window must fill first; from then on the leak is seen.
		if first < 0 || first > cfg.Window+30*time.Second {
			t.Errorf("%s: first flagged at %v, want by %v", test.name, first, cfg.Window+30*time.Second)
			continue
		}
		last := js[len(js)-1]
		if last.Verdict != Leak {
			t.Errorf("%s: at the end %v", test.name, last.Result)
		}
		t.Logf("%s: flagged at %v, %.1f MiB/min, tau %.2f", test.name, first, last.BytesPerMinute/MiB, last.Steadiness)
	}
}

func TestLeakRate(t *testing.T) {
	js, _ := run(DefaultConfig, 20*time.Minute, leak(4096*MiB, 38*MiB, 2*MiB))
	got := js[len(js)-1].BytesPerMinute / MiB
	if math.Abs(got-38) > 1 {
		t.Errorf("rate %.2f MiB/min, want 38", got)
	}
}

// A leak that stops is cleared once a third of the window has passed
// without a new high.
func TestLeakThatStops(t *testing.T) {
	cfg := DefaultConfig
	stop := 15 * 60.0
	js, _ := run(cfg, 30*time.Minute, func(s float64) float64 {
		return leak(4096*MiB, 38*MiB, 2*MiB)(min(s, stop))
	})
	for _, j := range js {
		if j.at > time.Duration(stop)*time.Second+cfg.Window/3+30*time.Second && j.Verdict == Leak {
			t.Fatalf("still a leak at %v, %v after it stopped", j.at, j.at-time.Duration(stop)*time.Second)
		}
	}
	if last := js[len(js)-1]; last.Verdict != Steady {
		t.Errorf("a window after it stopped: %v, want steady", last.Verdict)
	}
}

// The false-alarm behaviour stated in the README: none of these series,
// over many random shapes and 30 minutes of 1 Hz samples judged every
// 10 s, is ever called a leak.
func TestNoFalseAlarms(t *testing.T) {
	cfg := DefaultConfig
	type gen func(r *rand.Rand) func(float64) float64
	cases := []struct {
		name string
		gen  gen
		// want is the verdict after the last change in the series has
		// left the window.
		want Verdict
	}{
		{"flat with 1 MiB of jitter", func(r *rand.Rand) func(float64) float64 {
			return func(float64) float64 { return 8192*MiB + r.Float64()*MiB }
		}, Steady},
		{"saw-tooth", func(r *rand.Rand) func(float64) float64 {
			period := 2 + r.Float64()*300 // 2 s to 5 min
			amp := (1 + r.Float64()*4096) * MiB
			phase := r.Float64() * period
			return func(s float64) float64 {
				return 8192*MiB + amp*math.Mod(s+phase, period)/period
			}
		}, Steady},
		{"noise up to 512 MiB", func(r *rand.Rand) func(float64) float64 {
			return func(float64) float64 { return 8192*MiB + r.Float64()*512*MiB }
		}, Steady},
		{"one warm-up jump", func(r *rand.Rand) func(float64) float64 {
			at := r.Float64() * 300
			size := (64 + r.Float64()*20000) * MiB
			return func(s float64) float64 {
				if s < at {
					return 1024 * MiB
				}
				return 1024*MiB + size
			}
		}, Steady},
		{"warm-up in three steps within 5 minutes", func(r *rand.Rand) func(float64) float64 {
			var at [3]float64
			for i := range at {
				at[i] = float64(i)*100 + r.Float64()*100
			}
			step := (64 + r.Float64()*4096) * MiB
			return func(s float64) float64 {
				y := 1024.0 * MiB
				for _, a := range at {
					if s >= a {
						y += step
					}
				}
				return y
			}
		}, Steady},
		{"one jump in the middle of a saw-tooth", func(r *rand.Rand) func(float64) float64 {
			at := 300 + r.Float64()*600
			return func(s float64) float64 {
				y := 4096*MiB + float64(int(s)%13)*100*MiB
				if s >= at {
					y += 6000 * MiB
				}
				return y
			}
		}, Steady},
	}
	for _, c := range cases {
		r := rand.New(rand.NewPCG(1, 2))
		leaks, warmups, judgements := 0, 0, 0
		for range 50 {
			js, _ := run(cfg, 30*time.Minute, c.gen(r))
			leaks += count(js, Leak)
			warmups += count(js, Warmup)
			judgements += len(js)
			if last := js[len(js)-1].Verdict; last != c.want {
				t.Errorf("%s: ends %v, want %v", c.name, last, c.want)
				break
			}
		}
		if leaks > 0 {
			t.Errorf("%s: %d of %d judgements said leak", c.name, leaks, judgements)
		}
		t.Logf("%s: 0 leaks, %d warm-ups in %d judgements", c.name, warmups, judgements)
	}
}

// A jump is a warm-up while the window shows a plateau above where it
// began: while the jump lies in its middle third.
func TestWarmup(t *testing.T) {
	js, _ := run(DefaultConfig, 20*time.Minute, func(s float64) float64 {
		if s < 400 {
			return 1024 * MiB
		}
		return 9000 * MiB
	})
	for _, j := range js {
		var want Verdict
		switch {
		case j.at < 9*time.Minute+40*time.Second:
			want = Pending
		case j.at < 10*time.Minute+10*time.Second:
			continue // the jump is entering the last third
		case j.at < 13*time.Minute:
			want = Warmup
		case j.at >= 13*time.Minute+40*time.Second:
			want = Steady
		default:
			continue // the jump is leaving the first third, a bucket at a time
		}
		if j.Verdict != want {
			t.Errorf("at %v: %v, want %v", j.at, j.Verdict, want)
		}
	}
}

func TestSlowerThanMinRate(t *testing.T) {
	if _, first := run(DefaultConfig, 30*time.Minute, leak(4096*MiB, 0.5*MiB, 64*1024)); first >= 0 {
		t.Errorf("0.5 MiB/min flagged at %v; the threshold is 1 MiB/min", first)
	}
}

func TestWindowKeepsOnlyItsSpan(t *testing.T) {
	w := NewWindow(Config{Window: time.Minute, MinRate: 1, Steadiness: 0.7, Buckets: 10})
	for s := range 3600 {
		w.Add(t0.Add(time.Duration(s)*time.Second), uint64(s))
	}
	if w.Len() != 61 || cap(w.times) > 2*61+64 {
		t.Errorf("len %d cap %d", w.Len(), cap(w.times))
	}
	w.Add(t0, 5) // a clock step back is dropped
	if w.Len() != 61 {
		t.Errorf("after a sample from the past: %d", w.Len())
	}
}

func BenchmarkJudge(b *testing.B) {
	w := NewWindow(DefaultConfig)
	for s := range 600 {
		w.Add(t0.Add(time.Duration(s)*time.Second), uint64(s)*MiB)
	}
	b.ReportAllocs()
	for b.Loop() {
		w.Judge()
	}
}
