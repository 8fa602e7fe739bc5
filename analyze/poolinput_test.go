package analyze

import (
	"bytes"
	"github.com/vramscope/vramscope/internal/testutil"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/pools"
)

func servingLog(t *testing.T, name string) *pools.Log {
	t.Helper()
	l, err := pools.Parse(bytes.NewReader(testutil.Gunzip(t, "../testdata/pools/"+name+".log.gz")))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestServingLogFinding: the idle check's leak becomes a high leak finding
// of the process, worded with the pool's numbers and the likely causes.
func TestServingLogFinding(t *testing.T) {
	a := New(Options{})
	a.AddServingLog(inputs.Input{Path: "server.log", Kind: inputs.Text}, servingLog(t, "sglang04_idle_leak"))
	r := a.Report()
	if r.Verdict != Leak || len(r.Processes) != 1 || len(r.Processes[0].Findings) != 1 {
		t.Fatalf("verdict %s, %d processes", r.Verdict, len(r.Processes))
	}
	f := r.Processes[0].Findings[0]
	ev := f.Evidence
	if f.Kind != diagnose.KindLeak || f.Severity != diagnose.High || ev["pool"] != "token_to_kv_pool" ||
		ev["leaked_tokens"] != int64(20064) || ev["protected_tokens"] != int64(20064) || ev["leaked_fraction"] != 0.05 {
		t.Errorf("finding %+v", f)
	}
	if s, _ := ev["idle_check"].(string); !strings.Contains(s, "neither free nor evictable") || !strings.Contains(f.Fix, "retries") {
		t.Errorf("idle check %q, fix %q", s, f.Fix)
	}
}

// TestServingLogTrend: a leak without an idle check gives onset, growth,
// admission rate and time to exhaustion; healthy logs under heavy and
// daily load give no finding.
func TestServingLogTrend(t *testing.T) {
	tests := []struct {
		fixture string
		verdict Verdict
		onset   string
	}{
		{"sglang05_heavy_leak", Leak, "2026-03-02 08:22:29"},
		{"vllm_abort_leak", Leak, "03-02 08:37:36"},
		{"sglang04_heavy_healthy", Healthy, ""},
		{"vllm_daily_healthy", Healthy, ""},
	}
	for _, tt := range tests {
		a := New(Options{})
		a.AddServingLog(inputs.Input{Path: tt.fixture + ".log"}, servingLog(t, tt.fixture))
		p := a.Report().Processes[0]
		if p.Verdict != tt.verdict {
			t.Errorf("%s: %s, want %s", tt.fixture, p.Verdict, tt.verdict)
			continue
		}
		if tt.verdict == Healthy {
			continue
		}
		ev := p.Findings[0].Evidence
		for _, k := range []string{"growth_per_hour", "hours_to_exhaustion", "steadiness", "leaked_fraction"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("%s: evidence lacks %s: %v", tt.fixture, k, ev)
			}
		}
		if _, ok := ev["requests_per_minute_at_onset"]; ok != (p.Findings[0].Evidence["engine"] == "sglang") {
			t.Errorf("%s: request rate %v only where prefill lines count admissions", tt.fixture, ev["requests_per_minute_at_onset"])
		}
		if ev["onset"] != tt.onset {
			t.Errorf("%s: onset %v, want %s", tt.fixture, ev["onset"], tt.onset)
		}
	}
}

// TestServingLogPaste: a few pasted lines, one cut for good, give no trend
// and no crash; the unread line is said in a note.
func TestServingLogPaste(t *testing.T) {
	paste := "[2025-03-04 10:00:01 TP0] Decode batch. #running-req: 5, #token: 1938, token usage: 0.24, gen thr\n" +
		"oughput (token/s): 86.10, #queue-req: 0\n" +
		"[2025-03-04 10:00:04 TP0] Decode batch. #running-req: 6, #token: 25\n"
	l, err := pools.Parse(strings.NewReader(paste))
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{})
	a.AddServingLog(inputs.Input{Path: "paste.txt"}, l)
	p := a.Report().Processes[0]
	if p.Verdict != Healthy || len(p.Notes) != 2 || !strings.Contains(p.Notes[1], "1 of 3 lines look like pool stats but could not be read (first: line 3:") {
		t.Errorf("verdict %s, notes %q", p.Verdict, p.Notes)
	}
}

// TestServingLogCharts: each leaking rank of a log with several gets a
// finding that names it and a chart for the report: used tokens in at
// most chartBuckets buckets, the floors the verdict judged, the onset.
func TestServingLogCharts(t *testing.T) {
	a := New(Options{})
	a.AddServingLog(inputs.Input{Path: "server.log", Kind: inputs.Text}, servingLog(t, "sglang05_dp_busy_leak"))
	p := a.Report().Processes[0]
	if len(p.Findings) != 2 || len(p.PoolCharts) != 2 {
		t.Fatalf("%d findings, %d charts; want 2 and 2", len(p.Findings), len(p.PoolCharts))
	}
	// DP3's floor rises in two steps between flat stretches (Kendall tau
	// 0.65): the step test finds it, and the title says so.
	if ev := p.Findings[0].Evidence; ev["floor_growth"] != "steps" || !strings.Contains(p.Findings[0].Title, "steps up and never comes back down") {
		t.Errorf("DP3 TP0: %q, floor_growth %v", p.Findings[0].Title, ev["floor_growth"])
	}
	for i, rank := range []string{"DP3 TP0", "DP4 TP0"} {
		c := p.PoolCharts[i]
		if !strings.Contains(p.Findings[i].Title, "("+rank+")") || c.Rank != rank {
			t.Errorf("finding %q, chart of %q; want rank %s", p.Findings[i].Title, c.Rank, rank)
		}
		n := len(c.X)
		if n < chartBuckets/2 || n > chartBuckets || len(c.UsedMin) != n || len(c.UsedMax) != n || len(c.Floor) != len(c.FloorX) || len(c.Floor) < 20 {
			t.Errorf("%s: %d buckets (%d, %d), %d floors", rank, n, len(c.UsedMin), len(c.UsedMax), len(c.Floor))
		}
		onset, _ := p.Findings[i].Evidence["onset"].(string)
		if c.Onset == nil || *c.Onset <= c.X[0] || *c.Onset >= c.X[n-1] || c.OnsetLabel != onset || c.XUnit != "s" || c.Start != "2026-03-02 08:00:00" {
			t.Errorf("%s: onset %v (%q, finding %q), x in %s from %q", rank, c.Onset, c.OnsetLabel, onset, c.XUnit, c.Start)
		}
	}
}
