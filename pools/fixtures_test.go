package pools

import (
	"bytes"
	"encoding/json"
	"github.com/vramscope/vramscope/internal/testutil"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// truth is what testdata/pools/simulate.py leaked in a fixture: the first
// rank's pool, and with several ranks each rank's tokens.
type truth struct {
	Leak         bool             `json:"leak"`
	LeakedTokens int64            `json:"leaked_tokens"`
	FirstLeak    *string          `json:"first_leak"`
	Ranks        map[string]int64 `json:"ranks"`
}

func readFixture(t *testing.T, name string) *Log {
	t.Helper()
	l, err := Parse(bytes.NewReader(testutil.Gunzip(t, filepath.Join("../testdata/pools", name+".log.gz"))))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFixtures judges the simulator's logs against what it leaked: the
// healthy runs (heavy, bursty and daily load, long prompts, a growing
// prefix cache) and the ranks the bug never hit must not read as leaks;
// every rank that leaked must, with the idle check's count exact and the
// floor's estimate within 20 % of the truth (ratios lists the estimates
// over the truth as measured, to two decimals), and an onset no earlier
// than the first leak.
func TestFixtures(t *testing.T) {
	tests := []struct {
		name    string
		engine  Engine
		exact   bool // the idle check gives the count
		samples int
		// ratios is leaked_tokens / truth per leaking rank.
		ratios map[string]float64
	}{
		{"sglang04_idle_leak", SGLang, true, 129, map[string]float64{"TP0": 1}},
		{"sglang05_heavy_leak", SGLang, false, 12754, map[string]float64{"": 1.01}},
		{"sglang04_dp_bursty_leak", SGLang, false, 6173, map[string]float64{"DP1 TP0": 0.96}},
		{"vllm_abort_leak", VLLM, false, 2160, map[string]float64{"Engine 000": 0.99}},
		// Four ranks; two leak, in the busy hours only.
		{"sglang05_dp_busy_leak", SGLang, false, 41478, map[string]float64{"DP3 TP0": 0.97, "DP4 TP0": 1.02}},
		{"sglang04_heavy_healthy", SGLang, false, 12720, nil},
		{"sglang05_bursty_healthy", SGLang, false, 6165, nil},
		{"sglang05_daily_healthy", SGLang, false, 35846, nil},
		{"vllm_daily_healthy", VLLM, false, 4320, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want truth
			b, err := os.ReadFile(filepath.Join("../testdata/pools", tt.name+".truth.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			l := readFixture(t, tt.name)
			if l.Engine != tt.engine || l.Capacity != 400000 || l.NumSamples() != tt.samples || l.Unparsed != 0 {
				t.Fatalf("engine %s, capacity %d, %d samples, %d unparsed (%s); want %s, 400000, %d, 0",
					l.Engine, l.Capacity, l.NumSamples(), l.Unparsed, l.FirstUnparsed, tt.engine, tt.samples)
			}
			leaks, _ := Judge(l)
			got := map[string]Leak{}
			for _, lk := range leaks {
				if lk.Idle != nil {
					lk.Rank = "TP0" // the idle check names no rank
				}
				got[lk.Rank] = lk
			}
			for rank, lk := range got {
				if _, ok := tt.ratios[rank]; !ok {
					t.Errorf("rank %q judged leaking (%d tokens, floors %v); it leaked nothing", rank, lk.Leaked, lk.Floors)
				}
			}
			for rank, ratio := range tt.ratios {
				lk, ok := got[rank]
				if !ok {
					t.Errorf("rank %q not judged leaking", rank)
					continue
				}
				truth := want.LeakedTokens
				if want.Ranks != nil {
					truth = want.Ranks[rank]
				}
				checkLeak(t, lk, truth, want.FirstLeak, tt.exact, ratio)
			}
		})
	}
}

// checkLeak compares one rank's leak with what the simulator leaked.
func checkLeak(t *testing.T, lk Leak, truth int64, firstLeak *string, exact bool, ratio float64) {
	t.Helper()
	if exact {
		if lk.Idle == nil || lk.Leaked != truth || lk.Idle.Protected != truth {
			t.Errorf("leaked %d (idle check %+v), want exactly %d", lk.Leaked, lk.Idle, truth)
		}
		return
	}
	got := float64(lk.Leaked) / float64(truth)
	if got < 0.8 || got > 1.2 || math.Abs(got-ratio) > 0.005 {
		t.Errorf("%s: leaked %d estimated, truth %d: ratio %.3f, want %.2f (within 0.8-1.2)", lk.Rank, lk.Leaked, truth, got, ratio)
	}
	if firstLeak != nil {
		first, err := time.Parse(time.DateTime, *firstLeak)
		if err != nil {
			t.Fatal(err)
		}
		if onset := lk.OnsetTime.AddDate(2026-lk.OnsetTime.Year(), 0, 0); onset.Before(first) {
			t.Errorf("onset %v before the first leak %v", onset, first)
		}
	}
	if lk.HoursLeft <= 0 || lk.Trend == nil {
		t.Errorf("trend %+v, %.1f hours left", lk.Trend, lk.HoursLeft)
	}
	if lk.Engine == SGLang && !strings.Contains(lk.Causes(), "#20476") {
		t.Errorf("causes do not name the retried-chunk lock leak: %s", lk.Causes())
	}
	t.Logf("%s: leaked %d (truth %d, %.2f), onset %v, trend %+v, %.1f h left, %.2f req/min",
		lk.Rank, lk.Leaked, truth, got, lk.OnsetTime, lk.Trend, lk.HoursLeft, lk.RequestsPerMinute)
}
