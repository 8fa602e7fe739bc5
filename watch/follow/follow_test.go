package follow

import (
	"bytes"
	"context"
	"flag"
	"github.com/vramscope/vramscope/internal/testutil"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/vramscope/vramscope/pools"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var fast = Options{Poll: 5 * time.Millisecond, Judge: 0}

// fixture is the lines of a committed serving log: six hours of SGLang
// 0.4 with the retried-chunk leak on rank DP1 TP0.
func fixture(t *testing.T) []string {
	t.Helper()
	b := testutil.Gunzip(t, "../../testdata/pools/sglang04_dp_bursty_leak.log.gz")
	lines := strings.SplitAfter(string(b), "\n")
	return lines[:len(lines)-1] // after the last line end

}

func appendTo(t *testing.T, path string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

// waitLines waits for the follower to have read n lines.
func waitLines(t *testing.T, f *Follower, n int) State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := f.State()
		if st.Lines >= n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d lines, want %d (error %q)", st.Lines, n, st.Err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFollowRotation follows a log the test writes: a third, then the
// log rotated (renamed, a line still written to the old file, a new one
// created), then truncated in place. Every line is read once, and the
// verdict is the one analyze gives on the whole log.
func TestFollowRotation(t *testing.T) {
	lines := fixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.log")
	f := New(path, fast)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx) }()

	// Before the file exists the follower waits, saying why.
	time.Sleep(20 * time.Millisecond)
	if st := f.State(); st.Err == "" || st.Lines != 0 {
		t.Errorf("before the log exists: %+v", st)
	}
	third := len(lines) / 3
	appendTo(t, path, lines[:third])
	st := waitLines(t, f, third)
	if st.Err != "" || len(st.Pools) != 1 || st.Pools[0].Rank != "DP1 TP0" {
		t.Fatalf("after a third: %+v", st)
	}

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, path+".1", lines[third:third+1]) // the engine still had it open
	appendTo(t, path, lines[third+1:2*third])
	waitLines(t, f, 2*third)
	appendTo(t, path, lines[2*third:])
	st = waitLines(t, f, len(lines))

	whole, err := pools.Parse(strings.NewReader(strings.Join(lines, "")))
	if err != nil {
		t.Fatal(err)
	}
	leaks, _ := pools.Judge(whole)
	if len(leaks) != 1 {
		t.Fatalf("%d leaks in the whole log", len(leaks))
	}
	p := st.Pools[0]
	if st.Lines != whole.Lines || !p.Leak || p.Leaked != leaks[0].Leaked || p.Capacity != 400000 || p.Floor <= 0 {
		t.Errorf("followed: %d lines, %+v; the whole log: %d lines, leaked %d", st.Lines, p, whole.Lines, leaks[0].Leaked)
	}

	// copytruncate: the file starts again, shorter.
	if err := os.WriteFile(path, []byte(lines[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	st = waitLines(t, f, len(lines)+1)
	if st.Lines != len(lines)+1 {
		t.Errorf("after truncation: %d lines, want %d", st.Lines, len(lines)+1)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFollowStdin reads a log piped in ("-") until it ends.
func TestFollowStdin(t *testing.T) {
	lines := fixture(t)
	r, w := io.Pipe()
	f := New(Stdin, Options{Poll: fast.Poll, Stdin: r})
	done := make(chan error)
	go func() { done <- f.Run(context.Background()) }()
	for i := 0; i < len(lines); i += 500 {
		io.WriteString(w, strings.Join(lines[i:min(i+500, len(lines))], ""))
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := f.State(); st.Lines != len(lines) || len(st.Pools) != 1 || !st.Pools[0].Leak {
		t.Errorf("%d lines of %d, pools %+v", st.Lines, len(lines), st.Pools)
	}
}

type fixed State

func (s fixed) State() State { return State(s) }

func scrape(t *testing.T, st State) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fixed(st)))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGolden scrapes /metrics of the state the rotation test's log gives
// (read whole here); -update rewrites testdata/metrics.golden.
func TestGolden(t *testing.T) {
	f := New("server.log", fast)
	f.stream.Write([]byte(strings.Join(fixture(t), "")))
	f.judge()
	got := scrape(t, f.State())
	path := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("/metrics differs from %s (rerun with -update if intended):\n%s", path, got)
	}
	problems, err := promlint.New(bytes.NewReader([]byte(got))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
