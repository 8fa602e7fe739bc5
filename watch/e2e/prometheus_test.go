//go:build prometheus

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/watch/agent"
	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/gpu/gputest"
	"github.com/vramscope/vramscope/watch/metrics"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/proc/proctest"
	"github.com/vramscope/vramscope/watch/verdict"
)

const MiB = gputest.MiB

// cannedCapture answers a capture with leak_closure's finding (watch/dump's
// own test captures from a process that plays the hook).
type cannedCapture struct{}

func (cannedCapture) Capture(ctx context.Context, id proc.Identity) (*dump.Result, error) {
	return &dump.Result{PID: id.PID, Verdict: "leak", Findings: []diagnose.Finding{{
		Kind: diagnose.KindLeak, Severity: diagnose.High, BytesPerStep: 38 * MiB,
		Title:    "compute_next_token_logits keeps 38.00 MiB more live memory every step",
		Callsite: &diagnose.Frame{Function: "compute_next_token_logits", File: "/srv/leak_closure.py", Line: 78},
	}}}, nil
}

// startAgent runs the agent on a scripted node (a leaking and a steady
// process) every 100 ms with a 5 s window, serving /metrics on loopback.
func startAgent(t *testing.T, ctx context.Context) string {
	node := gputest.NewNode(1)
	tree := proctest.New(t)
	tree.Start(proctest.Process{PID: 4242, StartTicks: 1, Command: "leaker", Argv: []string{"python3", "leak.py"}, Env: map[string]string{"RANK": "0", dump.EnvOut: "/runs/mem"}})
	tree.Start(proctest.Process{PID: 4243, StartTicks: 1, Command: "steady", Argv: []string{"python3", "serve.py"}, Env: map[string]string{"RANK": "1"}})
	node.Set(0, 4242, 4096*MiB)
	node.Set(0, 4243, 8192*MiB)
	src, err := gpu.Open(node.Lib())
	if err != nil {
		t.Fatal(err)
	}
	vc := verdict.Config{Window: 5 * time.Second, MinRate: 1 * MiB, Steadiness: verdict.DefaultConfig.Steadiness, Buckets: 25}
	a, err := agent.New(agent.Config{Verdict: vc, Capture: true, CaptureEvery: time.Hour, CompactEvery: time.Hour}, src,
		&proc.Reader{Root: tree.Root, Keep: dump.EnvVars}, nil, cannedCapture{})
	if err != nil {
		t.Fatal(err)
	}
	// The leak: 2 MiB every 100 ms.
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for used := uint64(4096 * MiB); ; used += 2 * MiB {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				node.Set(0, 4242, used)
			}
		}
	}()
	go a.Run(ctx, 100*time.Millisecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(a, "e2e-node"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// query runs an instant query against Prometheus's HTTP API.
func query(addr, q string) ([]map[string]any, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, body.Error)
	}
	return body.Data.Result, nil
}

// waitFor polls q until ok accepts its result or 60 s pass.
func waitFor(t *testing.T, addr, q string, ok func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last []map[string]any
	var err error
	for time.Now().Before(deadline) {
		if last, err = query(addr, q); err == nil && ok(last) {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not there after 60 s: %v (last error %v)", q, last, err)
	return nil
}

func TestPrometheusScrapesWatch(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: .ci/prometheus installs Debian's package")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target := startAgent(t, ctx)

	dir := t.TempDir()
	rules, err := filepath.Abs("../../deploy/prometheus/vramscope.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: vramscope
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	}()

	// The target is up and the series are there, with their labels.
	waitFor(t, addr, `up{job="vramscope"} == 1`, func(r []map[string]any) bool { return len(r) == 1 })
	used := waitFor(t, addr, `vramscope_process_memory_used_bytes`, func(r []map[string]any) bool { return len(r) == 2 })
	for _, s := range used {
		m := s["metric"].(map[string]any)
		if m["hostname"] != "e2e-node" || (m["command"] != "leaker" && m["command"] != "steady") || m["uuid"] == "" {
			t.Errorf("series labels %v", m)
		}
	}
	waitFor(t, addr, `DCGM_FI_DEV_FB_USED{gpu="0"}`, func(r []map[string]any) bool { return len(r) == 1 })
	// The leak is seen once the 5 s window fills, and only the leaker.
	leaks := waitFor(t, addr, `vramscope_process_leak == 1`, func(r []map[string]any) bool { return len(r) > 0 })
	if len(leaks) != 1 || leaks[0]["metric"].(map[string]any)["pid"] != "4242" {
		t.Errorf("leaking series %v, want pid 4242 alone", leaks)
	}
	// The alert rule from deploy/ evaluates on them: pending (it needs
	// 5 minutes to fire).
	alerts := waitFor(t, addr, `ALERTS{alertname="VramscopeProcessLeak"}`, func(r []map[string]any) bool { return len(r) > 0 })
	if m := alerts[0]["metric"].(map[string]any); m["pid"] != "4242" || m["alertstate"] != "pending" {
		t.Errorf("alert %v", m)
	}
	// Every query of the Grafana dashboard runs, and those of its leak
	// panels find the leaker.
	b, err := os.ReadFile("../../deploy/grafana/vramscope.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			r, err := query(addr, strings.ReplaceAll(tg.Expr, "$hostname", ".*"))
			if err != nil || len(r) == 0 {
				t.Errorf("panel %q: %s: %v, %d series", p.Title, tg.Expr, err, len(r))
			}
		}
	}
	// With the capture, the callsite alert fires at once and names the line.
	fired := waitFor(t, addr, `ALERTS{alertname="VramscopeLeakCallsite",alertstate="firing"}`, func(r []map[string]any) bool { return len(r) > 0 })
	if m := fired[0]["metric"].(map[string]any); m["callsite"] != "/srv/leak_closure.py:78" || m["function"] != "compute_next_token_logits" || m["pid"] != "4242" {
		t.Errorf("callsite alert %v", m)
	}
	rate := waitFor(t, addr, `vramscope_process_memory_growth_bytes_per_second{pid="4242"}`, func(r []map[string]any) bool { return len(r) == 1 })
	t.Logf("Prometheus sees pid 4242 leaking at %v B/s (scripted: 20 MiB/s)", rate[0]["value"].([]any)[1])
}
