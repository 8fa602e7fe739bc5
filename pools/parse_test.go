package pools

import (
	"strings"
	"testing"
)

// TestParseLines reads one record in each format the engines print, as
// users paste them (sources in sglang.go and vllm.go).
func TestParseLines(t *testing.T) {
	tests := []struct {
		name, text string
		rank       string
		want       Sample
	}{
		{"sglang 0.4 decode, TP prefix",
			"[2025-03-04 10:00:01 TP0] Decode batch. #running-req: 5, #token: 1938, token usage: 0.24, gen throughput (token/s): 86.10, #queue-req: 0",
			"TP0", Sample{Running: 5, Used: 1938, Share: 0.24, Exact: true}},
		{"sglang 0.5 decode, comma, DP prefix, trailing separator",
			"[2025-12-01 10:00:01 DP1 TP0] Decode batch, #running-req: 12, #token: 40021, token usage: 0.06, cuda graph: True, gen throughput (token/s): 812.33, #queue-req: 3, ",
			"DP1 TP0", Sample{Running: 12, Queued: 3, Used: 40021, Share: 0.06, Exact: true}},
		{"sglang prefill without rank",
			"[2025-08-11 17:17:03] Prefill batch. #new-seq: 2, #new-token: 838, #cached-token: 4000, cache hit rate: 82.67%, token usage: 0.01, #running-req: 2, #queue-req: 0",
			"", Sample{Running: 2, Share: 0.01, Admitted: 2}},
		{"sglang prefill with index and mixed batch",
			"[2026-01-02 03:04:05 TP0] Prefill batch [10], #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.50, #running-req: 3, #queue-req: 1, #pending-token: 0, cuda graph: False, input throughput (token/s): 12.50, ",
			"TP0", Sample{Running: 3, Queued: 1, Share: 0.5, Admitted: 1}},
		{"sglang through Python logging, hybrid full token",
			"2026-02-01 10:00:00,123 [INFO] sglang.srt.managers.scheduler_metrics_mixin: Decode batch, #running-req: 1, #full token: 41, full token usage: 0.00, #swa token: 41, swa token usage: 0.00, gen throughput (token/s): 6.81, #queue-req: 0, ",
			"", Sample{Running: 1, Used: 41, Exact: true}},
		{"vllm v1 with process prefix",
			"(APIServer pid=1637) INFO 10-15 00:00:48 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, Waiting: 2 reqs, GPU KV cache usage: 4.5%, Prefix cache hit rate: 82.8%",
			"Engine 000", Sample{Running: 1, Queued: 2, Share: 0.045}},
		{"vllm v0 behind a container time stamp",
			"2025-10-15T00:00:48.753199366Z INFO 10-15 00:00:48 metrics.py:449] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 5 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 10.0%, CPU KV cache usage: 0.0%.",
			"", Sample{Running: 5, Queued: 1, Share: 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(strings.NewReader(tt.text + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Series) != 1 || len(l.Series[0].Samples) != 1 || l.Unparsed != 0 {
				t.Fatalf("%d samples, %d unparsed (%s)", l.NumSamples(), l.Unparsed, l.FirstUnparsed)
			}
			if l.Series[0].Rank != tt.rank {
				t.Errorf("rank %q, want %q", l.Series[0].Rank, tt.rank)
			}
			got := l.Series[0].Samples[0]
			got.At, got.Line = 0, 0
			if !got.Exact {
				got.Used = 0 // a share of an unknown pool
			}
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestParseIdleChecks reads SGLang's idle-check messages of each era.
func TestParseIdleChecks(t *testing.T) {
	tests := []struct {
		name, text string
		want       IdleCheck
	}{
		{"v0.4, available includes the evictable cache",
			"ValueError: token_to_kv_pool_allocator memory leak detected! available_size=379936, protected_size=20064, self.max_total_num_tokens=400000\n" +
				"self.token_to_kv_pool_allocator.available_size()=376000\nself.tree_cache.evictable_size()=3936\n",
			IdleCheck{Pool: "token_to_kv_pool", Capacity: 400000, Leaked: 20064, Protected: 20064}},
		{"v0.5.3+, available is the allocator's alone",
			"[2025-11-02 10:00:00 TP0] ValueError: token_to_kv_pool_allocator memory leak detected! self.max_total_num_tokens=1915816, available_size=1835128, evictable_size=52280, protected_size=26360\n",
			IdleCheck{Pool: "token_to_kv_pool", Capacity: 1915816, Leaked: 28408, Protected: 26360}},
		{"request slots, no space after the mark",
			"req_to_token_pool memory leak detected!available_size=57, total_size=64\n",
			IdleCheck{Pool: "req_to_token_pool", Capacity: 64, Leaked: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Idle) != 1 || l.Unparsed != 0 {
				t.Fatalf("%d idle checks, %d unparsed (%s)", len(l.Idle), l.Unparsed, l.FirstUnparsed)
			}
			got := l.Idle[0]
			got.At, got.Line = 0, 0
			if got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestParsePaste reads a few lines as users paste them into an issue:
// hard-wrapped at 80 columns, padded, with a line cut short for good and
// foreign lines between. Wrapped records are joined; the one that cannot
// be completed is counted, not fatal.
func TestParsePaste(t *testing.T) {
	lines := []string{
		"[2025-03-04 10:00:01 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, max_prefill_tokens=16384",
		"[2025-03-04 10:00:01 TP0] Decode batch. #running-req: 5, #token: 1938, token usa",
		"ge: 0.00, gen throughput (token/s): 86.10, #queue-req: 0      ",
		"[2025-03-04 10:00:02] INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
		"[2025-03-04 10:00:03 TP0] Decode batch. #running-req: 6, #token: 2",
		"301, token usage: 0.01, gen throughput (token/s): 90.00, #queue-req: 1",
		"[2025-03-04 10:00:04 TP0] Decode batch. #running-req: 6, #token: 25",
		"[2025-03-04 10:00:05 TP0] Decode batch. #running-req: 4, #token: 2102, token usage: 0.01, gen throughput (token/s): 91.00, #queue-req: 0",
	}
	l, err := Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	var used []int64
	for _, s := range l.Series[0].Samples {
		used = append(used, s.Used)
	}
	if len(used) != 3 || used[0] != 1938 || used[1] != 2301 || used[2] != 2102 {
		t.Errorf("used %v, want [1938 2301 2102]", used)
	}
	if l.Unparsed != 1 || !strings.HasPrefix(l.FirstUnparsed, "line 7:") {
		t.Errorf("%d unparsed, first %q; want 1, line 7", l.Unparsed, l.FirstUnparsed)
	}
	if l.Capacity != 400000 || !l.HasTime || l.Series[0].Samples[2].At != 4 {
		t.Errorf("capacity %d, time %v, last at %v s", l.Capacity, l.HasTime, l.Series[0].Samples[2].At)
	}
}

func TestDetect(t *testing.T) {
	for text, want := range map[string]bool{
		"[x] Decode batch. #running-req: 1, #token: 5, token usage: 0.00, #queue-req: 0":   true,
		"[x] Decode batch. #running-req: 1, #token: 5, tok\nen usage: 0.00, #queue-req: 0": true,
		"Engine 000: Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%":           true,
		"req_to_token_pool memory leak detected!available_size=1, total_size=2":            true,
		"epoch 1 loss 0.3 token usage high":                                                false,
		`fmt = "%sDecode batch. #running-req: %d, #token: %d, token usage: %.2f"`:          false,
	} {
		if got := Detect([]byte(text)); got != want {
			t.Errorf("Detect(%q) = %v", text, got)
		}
	}
}

// TestRanksAtOneSecond: lines of two DP engines printed in the same second
// are two series (the stamp cache must not carry one engine's rank over).
func TestRanksAtOneSecond(t *testing.T) {
	for text, want := range map[string]string{
		"(APIServer pid=9) INFO 10-15 00:00:48 [loggers.py:123] Engine 000: Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%\n" +
			"(APIServer pid=9) INFO 10-15 00:00:48 [loggers.py:123] Engine 001: Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.0%\n": "Engine 000|Engine 001",
		"[2025-03-04 10:00:01 DP0 TP0] Decode batch. #running-req: 5, #token: 10, token usage: 0.00, #queue-req: 0\n" +
			"[2025-03-04 10:00:01 DP1 TP0] Decode batch. #running-req: 5, #token: 20, token usage: 0.00, #queue-req: 0\n": "DP0 TP0|DP1 TP0",
	} {
		l, err := Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range l.Series {
			got = append(got, s.Rank)
		}
		if strings.Join(got, "|") != want {
			t.Errorf("ranks %q, want %s", got, want)
		}
	}
}
