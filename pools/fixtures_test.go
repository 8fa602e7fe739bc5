package pools

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// truth is what testdata/pools/simulate.py leaked in a fixture.
type truth struct {
	Leak         bool    `json:"leak"`
	LeakedTokens int64   `json:"leaked_tokens"`
	FirstLeak    *string `json:"first_leak"`
}

func readFixture(t *testing.T, name string) *Log {
	t.Helper()
	f, err := os.Open(filepath.Join("../testdata/pools", name+".log.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Parse(zr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFixtures judges the simulator's logs against what it leaked: the
// healthy runs (heavy, bursty and daily load, long prompts, a growing
// prefix cache) must not read as leaks, the buggy ones must, with the
// idle check's count exact and the floor's estimate within a factor of
// two of the truth, and an onset no earlier than the first leak.
func TestFixtures(t *testing.T) {
	tests := []struct {
		name    string
		engine  Engine
		exact   bool   // the idle check gives the count
		rank    string // the series that leaks
		samples int
	}{
		{"sglang04_idle_leak", SGLang, true, "TP0", 129},
		{"sglang05_heavy_leak", SGLang, false, "", 12754},
		{"sglang04_dp_bursty_leak", SGLang, false, "DP1 TP0", 6173},
		{"vllm_abort_leak", VLLM, false, "Engine 000", 2160},
		{"sglang04_heavy_healthy", SGLang, false, "", 12720},
		{"sglang05_bursty_healthy", SGLang, false, "", 6165},
		{"sglang05_daily_healthy", SGLang, false, "", 35846},
		{"vllm_daily_healthy", VLLM, false, "", 4320},
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
			if l.Engine != tt.engine || l.Capacity != 400000 || len(l.Samples) != tt.samples || l.Unparsed != 0 {
				t.Fatalf("engine %s, capacity %d, %d samples, %d unparsed (%s); want %s, 400000, %d, 0",
					l.Engine, l.Capacity, len(l.Samples), l.Unparsed, l.FirstUnparsed, tt.engine, tt.samples)
			}
			leaks, _ := Judge(l)
			if !want.Leak {
				if len(leaks) != 0 {
					lk := leaks[0]
					t.Fatalf("healthy run judged leaking: %d tokens, trend %+v, floors %v", lk.Leaked, lk.Trend, lk.Floors)
				}
				return
			}
			if len(leaks) != 1 {
				t.Fatalf("%d leaks, want 1", len(leaks))
			}
			lk := leaks[0]
			if lk.Rank != tt.rank && lk.Idle == nil {
				t.Errorf("rank %q, want %q", lk.Rank, tt.rank)
			}
			if tt.exact {
				if lk.Idle == nil || lk.Leaked != want.LeakedTokens || lk.Idle.Protected != want.LeakedTokens {
					t.Errorf("leaked %d (idle check %+v), want exactly %d", lk.Leaked, lk.Idle, want.LeakedTokens)
				}
			} else if lk.Leaked < want.LeakedTokens/2 || lk.Leaked > 2*want.LeakedTokens {
				t.Errorf("leaked %d estimated, truth %d: off by more than a factor of two", lk.Leaked, want.LeakedTokens)
			}
			first, err := time.Parse(time.DateTime, *want.FirstLeak)
			if err != nil {
				t.Fatal(err)
			}
			if onset := lk.OnsetTime.AddDate(2026-lk.OnsetTime.Year(), 0, 0); onset.Before(first) {
				t.Errorf("onset %v before the first leak %v", onset, first)
			}
			if lk.Trend != nil && (lk.HoursLeft <= 0 || lk.Trend.PerStep <= 0) {
				t.Errorf("trend %+v, %.1f hours left", lk.Trend, lk.HoursLeft)
			}
			if lk.Engine == SGLang && !strings.Contains(lk.Causes(), "#20476") {
				t.Errorf("causes do not name the retried-chunk lock leak: %s", lk.Causes())
			}
			t.Logf("leaked %d (truth %d), onset %v, trend %+v, %.1f h left, %.2f req/min",
				lk.Leaked, want.LeakedTokens, lk.OnsetTime, lk.Trend, lk.HoursLeft, lk.RequestsPerMinute)
		})
	}
}
