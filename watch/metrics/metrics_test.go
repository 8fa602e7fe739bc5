package metrics

import (
	"flag"
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
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/watch/agent"
	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/verdict"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

type fixed agent.State

func (f fixed) State() agent.State { return agent.State(f) }

const MiB = 1 << 20

func intp(v int) *int { return &v }

// node is a state with every case the metrics distinguish: a GPU with a
// leaking (and captured), a steady and a pending process; a MIG GPU; a
// lost GPU.
func node() agent.State {
	seen := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	mem := func(total, used uint64) gpu.Memory { return gpu.Memory{Total: total, Used: used, Free: total - used} }
	p := func(gpuIdx int, uuid string, pid int, cmd string, rank *int, used uint64, v verdict.Result) agent.Process {
		return agent.Process{
			Key: uuid + "/" + string(rune('0'+pid%10)), GPU: gpuIdx, UUID: uuid, Instance: -1,
			Identity:  proc.Identity{PID: pid, StartTicks: 1, Command: cmd, User: "alice", Rank: rank, LocalRank: rank, Container: "0f0f0f0f0f0f", Pod: "1d2c3b4a-5e6f-4a1b-9c8d-0123456789ab"},
			UsedBytes: used, Verdict: v, FirstSeen: seen,
		}
	}
	leaker := p(0, "GPU-0", 4242, "python3", intp(0), 9000*MiB, verdict.Result{Verdict: verdict.Leak, BytesPerMinute: 38 * MiB, Steadiness: 0.97})
	leaker.Hooked = true
	leaker.Capture = &dump.Result{Verdict: "leak", Findings: []diagnose.Finding{
		{Kind: diagnose.KindLeak, Severity: diagnose.High, BytesPerStep: 38 * MiB, Callsite: &diagnose.Frame{Function: "compute_next_token_logits", File: "/srv/leak_closure.py", Line: 78}},
		{Kind: diagnose.KindPeak, Severity: diagnose.Low, Callsite: &diagnose.Frame{Function: "apply_logits_bias", File: "/srv/leak_closure.py", Line: 88}},
	}}
	mig := p(1, "GPU-1", 5000, "vllm", nil, 2000*MiB, verdict.Result{Verdict: verdict.Pending})
	mig.Instance = 2
	return agent.State{
		Up: true, Driver: "550.54.15", Samples: 600, SampleSeconds: 1.5,
		NVMLErrors: map[string]uint64{"DeviceGetHandleByIndex": 20, "GetComputeRunningProcesses": 1},
		Captures:   map[string]uint64{"ok": 1},
		Devices: []gpu.Device{
			{Index: 0, UUID: "GPU-0", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:18:00.0", Minor: 0, Up: true, Memory: mem(80*1024*MiB, 14000*MiB)},
			{Index: 1, UUID: "GPU-1", Name: "NVIDIA A100-SXM4-80GB", PCIBusID: "00000000:19:00.0", Minor: 1, Up: true, Memory: mem(80*1024*MiB, 3000*MiB),
				Instances: []gpu.Instance{{ID: 1, Profile: "3g.40gb", Memory: mem(40*1024*MiB, 512*MiB)}, {ID: 2, Profile: "3g.40gb", Memory: mem(40*1024*MiB, 2512*MiB)}}},
			{Index: 2, UUID: "GPU-2", Name: "NVIDIA H100 80GB HBM3", Minor: 2, Err: "DeviceGetHandleByIndex: ERROR_GPU_IS_LOST"},
		},
		Processes: []agent.Process{
			leaker,
			p(0, "GPU-0", 4243, "python3", intp(1), 4500*MiB, verdict.Result{Verdict: verdict.Steady}),
			mig,
		},
	}
}

func scrape(t *testing.T, st agent.State) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(fixed(st), "gpu-node-7"))
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
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// TestGolden scrapes /metrics of a fixed state; -update rewrites
// testdata/metrics.golden.
func TestGolden(t *testing.T) {
	got := scrape(t, node())
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
}

// TestLint runs client_golang's promlint (Prometheus's naming rules) over
// vramscope's own series; the DCGM_ names are dcgm-exporter's, kept as
// they are on purpose.
func TestLint(t *testing.T) {
	problems, err := promlint.New(strings.NewReader(scrape(t, node()))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if !strings.HasPrefix(p.Metric, "DCGM_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

// dcgm-exporter's dashboards select on these label names.
func TestDCGMNames(t *testing.T) {
	out := scrape(t, node())
	for _, want := range []string{
		`DCGM_FI_DEV_FB_USED{DCGM_FI_DRIVER_VERSION="550.54.15",GPU_I_ID="",GPU_I_PROFILE="",Hostname="gpu-node-7",UUID="GPU-0",device="nvidia0",gpu="0",modelName="NVIDIA H100 80GB HBM3",pci_bus_id="00000000:18:00.0"} 14000`,
		`DCGM_FI_DEV_FB_FREE{DCGM_FI_DRIVER_VERSION="550.54.15",GPU_I_ID="2",GPU_I_PROFILE="3g.40gb",Hostname="gpu-node-7",UUID="GPU-1",device="nvidia1",gpu="1",modelName="NVIDIA A100-SXM4-80GB",pci_bus_id="00000000:19:00.0"} 38448`,
		`vramscope_device_up{gpu="2",hostname="gpu-node-7",model_name="NVIDIA H100 80GB HBM3",uuid="GPU-2"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}
