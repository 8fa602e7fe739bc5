package agent

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/gpu/gputest"
	"github.com/vramscope/vramscope/watch/history"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/proc/proctest"
	"github.com/vramscope/vramscope/watch/verdict"
)

const MiB = gputest.MiB

var t0 = time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)

// procTree is a fake /proc whose processes have RANK = pid % 8.
type procTree struct{ *proctest.Tree }

func newProcTree(t *testing.T) *procTree { return &procTree{proctest.New(t)} }

func (tr *procTree) start(pid int, start uint64, command string, env map[string]string) {
	e := map[string]string{"RANK": strconv.Itoa(pid % 8)}
	maps.Copy(e, env)
	tr.Start(proctest.Process{PID: pid, StartTicks: start, Command: command, Argv: []string{"/usr/bin/python3", command + ".py"}, Env: e})
}

func (tr *procTree) reader() *proc.Reader { return &proc.Reader{Root: tr.Root, Keep: dump.EnvVars} }

func newAgent(t *testing.T, node *gputest.Node, procs Procs, store *history.Store, capt Capturer) (*Agent, *strings.Builder) {
	t.Helper()
	src, err := gpu.Open(node.Lib())
	if err != nil {
		t.Fatal(err)
	}
	log := &strings.Builder{}
	a, err := New(Config{Verdict: verdict.DefaultConfig, Capture: true, CaptureEvery: 10 * time.Minute, CompactEvery: time.Hour, Log: log}, src, procs, store, capt)
	if err != nil {
		t.Fatal(err)
	}
	return a, log
}

func byPID(st State, pid int) *Process {
	for i := range st.Processes {
		if st.Processes[i].PID == pid {
			return &st.Processes[i]
		}
	}
	return nil
}

// The scripted node: on GPU 0 a process that leaks 38 MiB a minute, a flat
// one and one that warms up; on GPU 1 a saw-tooth and short-lived
// processes that come and go. GPU 1 is lost for 20 s, and one NVML call
// fails once.
func TestScriptedNode(t *testing.T) {
	node := gputest.NewNode(2)
	procs := newProcTree(t)
	for pid, cmd := range map[int]string{100: "leaker", 101: "flat", 102: "warmup", 200: "sawtooth"} {
		procs.start(pid, uint64(pid)*10, cmd, nil)
	}
	a, log := newAgent(t, node, procs.reader(), nil, nil)
	var firstLeak time.Duration = -1
	for s := 0; s <= 15*60; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		node.Set(0, 100, uint64(4096*MiB+(s*38*MiB/60)/(2*MiB)*(2*MiB)))
		node.Set(0, 101, 6000*MiB)
		warm := uint64(1000 * MiB)
		if s > 200 {
			warm = 9000 * MiB
		}
		node.Set(0, 102, warm)
		node.Set(1, 200, uint64(2000*MiB+(s%17)*300*MiB))
		// Churn: pid 300+k lives for 40 s from k*60 s.
		for k := range 15 {
			pid := 300 + k
			switch s {
			case k * 60:
				procs.start(pid, uint64(10_000+k), "worker", nil)
				node.Set(1, uint32(pid), 500*MiB)
			case k*60 + 40:
				node.End(1, uint32(pid))
			}
		}
		switch s {
		case 300:
			node.Update(1, func(g *gputest.GPU) { g.Lost = true })
		case 320:
			node.Update(1, func(g *gputest.GPU) { g.Lost = false })
		case 400:
			node.Update(0, func(g *gputest.GPU) { g.Fail["GetComputeRunningProcesses"] = nvml.ERROR_UNKNOWN })
		case 401:
			node.Update(0, func(g *gputest.GPU) { delete(g.Fail, "GetComputeRunningProcesses") })
		}
		a.Step(now)
		st := a.State()
		if s == 310 {
			if st.Devices[1].Up || byPID(st, 200) == nil {
				t.Errorf("GPU 1 lost: up %v, its process kept: %v", st.Devices[1].Up, byPID(st, 200) != nil)
			}
		}
		for _, p := range st.Processes {
			if p.Verdict.Verdict == verdict.Leak && p.PID != 100 {
				t.Fatalf("at %ds pid %d (%s) called a leak: %+v", s, p.PID, p.Command, p.Verdict)
			}
		}
		if p := byPID(st, 100); firstLeak < 0 && p != nil && p.Verdict.Verdict == verdict.Leak {
			firstLeak = time.Duration(s) * time.Second
		}
	}
	st := a.State()
	if firstLeak < 0 || firstLeak > 11*time.Minute {
		t.Errorf("leak flagged at %v, want within 11 min (its 10 min window, filled)", firstLeak)
	}
	p := byPID(st, 100)
	if p == nil || p.Verdict.Verdict != verdict.Leak || p.Verdict.BytesPerMinute < 36*MiB || p.Verdict.BytesPerMinute > 40*MiB {
		t.Errorf("leaker: %+v", p)
	}
	if v := byPID(st, 101).Verdict.Verdict; v != verdict.Steady {
		t.Errorf("flat: %v", v)
	}
	if st.NVMLErrors["DeviceGetHandleByIndex"] != 20 || st.NVMLErrors["GetComputeRunningProcesses"] != 1 {
		t.Errorf("NVML errors %v, want 20 handle errors (20 s lost) and 1 process list", st.NVMLErrors)
	}
	// Churned processes end with their series: only pid 314 (started at
	// 840 s, ends at 880 s) is gone too by 900 s.
	for _, p := range st.Processes {
		if p.Command == "worker" {
			t.Errorf("worker pid %d still live", p.PID)
		}
	}
	if len(st.Processes) != 4 || st.Samples != 901 {
		t.Errorf("%d processes, %d samples", len(st.Processes), st.Samples)
	}
	for _, want := range []string{"gpu1 GPU-abcd0001-0000-0000-0000-000000000001 down", "gpu1 GPU-abcd0001-0000-0000-0000-000000000001 back", "pid 100 (leaker, rank 4): pending -> leak", "pid 314 (worker, rank 2) ended"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// A reused pid starts a new series with a new verdict window.
func TestPIDReuse(t *testing.T) {
	node := gputest.NewNode(1)
	procs := newProcTree(t)
	procs.start(100, 1, "first", nil)
	a, _ := newAgent(t, node, procs.reader(), nil, nil)
	for s := range 60 {
		node.Set(0, 100, uint64(1000+s)*MiB)
		a.Step(t0.Add(time.Duration(s) * time.Second))
	}
	procs.start(100, 2, "second", nil)
	a.Step(t0.Add(60 * time.Second))
	st := a.State()
	if len(st.Processes) != 1 || st.Processes[0].Command != "second" || st.Processes[0].Key != "GPU-abcd0000-0000-0000-0000-000000000000/100/2" || !st.Processes[0].FirstSeen.Equal(t0.Add(60*time.Second)) {
		t.Errorf("after the pid was reused: %+v", st.Processes)
	}
}

// After a restart the agent picks each live process's window up from the
// history: a leak is flagged a window after it started, not a window after
// the restart.
func TestRestartKeepsWindows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	node := gputest.NewNode(1)
	procs := newProcTree(t)
	procs.start(100, 1, "leaker", nil)
	leak := func(s int) uint64 { return uint64(4096*MiB + s*38*MiB/60) }
	run := func(from, to int) (firstLeak int) {
		store, err := history.Open(path, history.DefaultOptions)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		a, _ := newAgent(t, node, procs.reader(), store, nil)
		firstLeak = -1
		for s := from; s < to; s++ {
			node.Set(0, 100, leak(s))
			a.Step(t0.Add(time.Duration(s) * time.Second))
			if firstLeak < 0 && a.State().Processes[0].Verdict.Verdict == verdict.Leak {
				firstLeak = s
			}
		}
		return firstLeak
	}
	if first := run(0, 360); first >= 0 {
		t.Fatalf("flagged at %d s, before the window filled", first)
	}
	// 30 s of downtime, then the agent runs again.
	if first := run(390, 900); first < 0 || first > 620 {
		t.Errorf("after the restart, flagged at %d s, want by 620 s (the window started at 0)", first)
	}
}

// fakeCapturer answers with leak_closure's finding.
type fakeCapturer struct {
	mu    sync.Mutex
	calls []int
}

func (f *fakeCapturer) Capture(ctx context.Context, id proc.Identity) (*dump.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, id.PID)
	f.mu.Unlock()
	return &dump.Result{PID: id.PID, Dump: "/runs/mem/20261124-081500/server_rank0_pid100_signal.pickle", Verdict: "leak",
		Findings: []diagnose.Finding{{Kind: diagnose.KindLeak, Severity: diagnose.High, Title: "compute_next_token_logits keeps 38.00 MiB more live memory every step",
			BytesPerStep: 38 * MiB, Callsite: &diagnose.Frame{Function: "compute_next_token_logits", File: "leak_closure.py", Line: 78}}}}, nil
}

// A hooked process that turns into a leak is captured at once, then again
// every CaptureEvery (10 min here) while it stays one, and its findings
// stay with it; an unhooked one is never signalled.
func TestCaptureOnLeak(t *testing.T) {
	node := gputest.NewNode(1)
	procs := newProcTree(t)
	procs.start(100, 1, "hooked", map[string]string{dump.EnvOut: "/runs/mem"})
	procs.start(101, 1, "plain", nil)
	capt := &fakeCapturer{}
	a, log := newAgent(t, node, procs.reader(), nil, capt)
	for s := 0; s <= 21*60; s++ {
		node.Set(0, 100, uint64(4096*MiB+s*38*MiB/60))
		node.Set(0, 101, uint64(4096*MiB+s*38*MiB/60))
		a.Step(t0.Add(time.Duration(s) * time.Second))
		a.Wait()
	}
	// Flagged at 9 min 40 s, captured then and 10 min later.
	if fmt.Sprint(capt.calls) != "[100 100]" {
		t.Errorf("captures %v, want two of pid 100", capt.calls)
	}
	st := a.State()
	p := byPID(st, 100)
	if p.Capture == nil || p.Capture.Top().Callsite.Line != 78 || st.Captures["ok"] != 2 {
		t.Errorf("capture %+v, counters %v", p.Capture, st.Captures)
	}
	if !strings.Contains(log.String(), "captured /runs/mem/20261124-081500/server_rank0_pid100_signal.pickle: leak: compute_next_token_logits keeps 38.00 MiB more live memory every step at leak_closure.py:78") {
		t.Errorf("log:\n%s", log)
	}
}

func TestNVMLDown(t *testing.T) {
	node := gputest.NewNode(1)
	procs := newProcTree(t)
	a, log := newAgent(t, node, procs.reader(), nil, nil)
	a.Step(t0)
	node.CountErr = nvml.ERROR_UNKNOWN
	a.Step(t0.Add(time.Second))
	a.Step(t0.Add(2 * time.Second))
	st := a.State()
	if st.Up || st.NVMLErrors["DeviceGetCount"] != 2 || strings.Count(log.String(), "nvml:") != 1 {
		t.Errorf("up %v errors %v log %q", st.Up, st.NVMLErrors, log)
	}
}
