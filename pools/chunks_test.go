package pools

import (
	"bytes"
	"github.com/vramscope/vramscope/internal/testutil"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestChunksMatchWhole: a log read in small chunks on several cores gives
// what it gives read in one piece, line numbers, wrapped records, ranks,
// days and the first unread line included.
func TestChunksMatchWhole(t *testing.T) {
	logs := map[string][]byte{
		"paste": []byte(strings.Join([]string{
			"[2025-03-04 10:00:01 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192",
			"[2025-03-04 10:00:01 TP0] Decode batch. #running-req: 5, #token: 1938, token usa",
			"ge: 0.00, gen throughput (token/s): 86.10, #queue-req: 0      ",
			"[2025-03-04 10:00:03 TP0] Decode batch. #running-req: 6, #token: 2",
			"301, token usage: 0.01, gen throughput (token/s): 90.00, #queue-req: 1",
			"[2025-03-04 10:00:04 TP0] Decode batch. #running-req: 6, #token: 25",
			"[23:59:59 TP1] Decode batch. #running-req: 1, #token: 5, token usage: 0.00, #queue-req: 0",
			"[00:00:01 TP1] Decode batch. #running-req: 1, #token: 6, token usage: 0.00, #queue-req: 0",
		}, "\n")),
	}
	for _, name := range []string{"sglang04_idle_leak", "sglang04_dp_bursty_leak", "vllm_abort_leak"} {
		logs[name] = gunzip(t, name)
	}
	for name, data := range logs {
		whole, err := parse(bytes.NewReader(data), len(data)+1)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{64, 1000, 64 << 10} {
			got, err := parse(bytes.NewReader(data), size)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, whole) {
				t.Errorf("%s in chunks of %d: %d samples, %d idle checks, %d lines, %d unparsed (%s); whole: %d, %d, %d, %d (%s)",
					name, size, got.NumSamples(), len(got.Idle), got.Lines, got.Unparsed, got.FirstUnparsed,
					whole.NumSamples(), len(whole.Idle), whole.Lines, whole.Unparsed, whole.FirstUnparsed)
			}
		}
	}
}

// TestStream: a log written in pieces of any size reads as the whole.
func TestStream(t *testing.T) {
	data := gunzip(t, "sglang04_dp_bursty_leak")
	whole, err := Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream()
	for i, piece := 0, 1; len(data) > 0; i++ {
		piece = min(piece*3%4099+1, len(data))
		s.Write(data[:piece])
		data = data[piece:]
		if i == 100 {
			if n := s.Log().NumSamples(); n == 0 || n >= whole.NumSamples() {
				t.Errorf("%d samples after 100 pieces, of %d", n, whole.NumSamples())
			}
		}
	}
	if got := s.Log(); !reflect.DeepEqual(got, whole) {
		t.Errorf("streamed: %d samples, %d lines, capacity %d; whole: %d, %d, %d",
			got.NumSamples(), got.Lines, got.Capacity, whole.NumSamples(), whole.Lines, whole.Capacity)
	}
}

// TestLongLine: a line longer than maxLine is an error naming where, not
// a log held whole in memory.
func TestLongLine(t *testing.T) {
	data := append(bytes.Repeat([]byte("x"), maxLine+10), '\n')
	if _, err := Parse(bytes.NewReader(data)); err == nil || !strings.Contains(err.Error(), "line 1: a line longer than 16 MiB") {
		t.Errorf("err %v", err)
	}
}

func gunzip(t *testing.T, name string) []byte {
	t.Helper()
	return testutil.Gunzip(t, filepath.Join("../testdata/pools", name+".log.gz"))
}
