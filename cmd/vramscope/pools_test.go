package main

import (
	"context"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalyzeServingLogWithOOM: a serving log is streamed, not read
// whole, and an OOM message anywhere in it (here past the first MiB the
// kind is judged from) is still read beside the pool leak.
func TestAnalyzeServingLogWithOOM(t *testing.T) {
	log := testutil.Gunzip(t, "../../testdata/pools/sglang04_dp_bursty_leak.log.gz")
	log = append(log, testutil.Gunzip(t, "../../testdata/pools/sglang04_dp_bursty_leak.log.gz")[2000:]...) // past 1 MiB
	log = append(log, "[2026-03-02 14:00:01 DP1 TP0] RuntimeError: CUDA out of memory. Tried to allocate 1.46 GiB (GPU 0; 23.65 GiB total capacity; 21.02 GiB already allocated; 1.03 GiB free; 21.30 GiB reserved in total by PyTorch)\n"...)
	path := filepath.Join(t.TempDir(), "server.log")
	if err := os.WriteFile(path, log, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), &stdout, &stderr, []string{"analyze", "--json", path}); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{`"pool": "token_to_kv_pool"`, `"kind": "oom"`} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze --json lacks %s", want)
		}
	}
}
