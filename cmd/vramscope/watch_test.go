package main

import (
	"bufio"
	"bytes"
	"context"
	"github.com/vramscope/vramscope/internal/testutil"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// On a machine without the NVIDIA driver the binary still starts, and
// watch says why it cannot run, with exit status 2.
func TestWatchWithoutDriver(t *testing.T) {
	lib := nvml.New()
	if lib.Init() == nvml.SUCCESS {
		lib.Shutdown()
		t.Skip("this machine has an NVIDIA driver, so the no-driver path cannot happen here: .ci/run, without one, runs it; scripts/watch-e2e.sh covers the driver path on the GPU")
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), &stdout, &stderr, []string{"watch", "--listen", "127.0.0.1:0"})
	if code != exitInputError || !strings.Contains(stderr.String(), "no NVIDIA driver was found") {
		t.Errorf("exit %d, stderr %q; want 2 and no NVIDIA driver", code, stderr.String())
	}
}

func TestWatchDumpNotHooked(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), &stdout, &stderr, []string{"watch", "--dump", "1"})
	if code != exitInputError || !strings.Contains(stderr.String(), "not running under the vramscope hook") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestWatchBadFlags(t *testing.T) {
	for _, args := range [][]string{{"watch", "--window", "0s"}, {"watch", "--steadiness", "2"}, {"watch", "--interval", "0s"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), &stdout, &stderr, args); code != exitUsage {
			t.Errorf("%v: exit %d, want 1: %s", args, code, stderr.String())
		}
	}
}

// The live page's report link renders report's page of a capture's
// snapshots.
func TestWatchReportPage(t *testing.T) {
	var b strings.Builder
	paths := []string{"../../testdata/scenarios/out/leak_closure/step2/server_rank0_pid561.pickle.gz", "../../testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz"}
	if err := writeReportPage(context.Background(), &b, "vramscope: pid 561 (server) on gpu 0", paths); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "pid 561 (server) on gpu 0") || !strings.Contains(b.String(), "compute_next_token_logits") {
		t.Errorf("page of %d bytes lacks the title or the leak", b.Len())
	}
}

// TestWatchFollowWithoutDriver: on a machine without a GPU, watch
// --follow judges the serving log alone and serves its pools' metrics.
func TestWatchFollowWithoutDriver(t *testing.T) {
	lib := nvml.New()
	if lib.Init() == nvml.SUCCESS {
		lib.Shutdown()
		t.Skip("this machine has an NVIDIA driver, so the no-driver path cannot happen here: .ci/run, without one, runs it; scripts/watch-e2e.sh covers the driver path on the GPU")
	}
	log := filepath.Join(t.TempDir(), "server.log")
	if err := os.WriteFile(log, testutil.Gunzip(t, "../../testdata/pools/sglang04_dp_bursty_leak.log.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- run(ctx, io.Discard, pw, []string{"watch", "--follow", log, "--listen", "127.0.0.1:0", "--interval", "50ms"})
		pw.Close()
	}()
	var url string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && url == "" {
		if _, rest, ok := strings.Cut(sc.Text(), "metrics on "); ok {
			url, _, _ = strings.Cut(rest, ",")
		}
	}
	go io.Copy(io.Discard, pr)
	want := `vramscope_pool_leak_suspected{engine="sglang",pool="token_to_kv_pool",rank="DP1 TP0"} 1`
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !strings.Contains(body, want); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	if !strings.Contains(body, want) {
		t.Errorf("metrics at %q lack %s:\n%s", url, want, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}
