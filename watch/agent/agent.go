// Package agent ties watch together: every interval it samples the GPUs,
// names each process, feeds its verdict window and the history, asks
// processes that turn into leaks for a snapshot, and keeps the state that
// /metrics and the live page show.
package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/history"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/verdict"
)

// Source reads the GPUs: *gpu.Sampler.
type Source interface {
	Sample(now time.Time) (gpu.Sample, error)
}

// Procs names processes: *proc.Reader.
type Procs interface {
	StartTicks(pid int) (uint64, error)
	Read(pid int) (proc.Identity, error)
	// Forget is told when a pid is no longer watched.
	Forget(pid int)
}

// Capturer asks a hooked process for a snapshot and analyzes it:
// *dump.Capturer.
type Capturer interface {
	Capture(ctx context.Context, id proc.Identity) (*dump.Result, error)
}

// Config is the agent's behaviour.
type Config struct {
	Verdict verdict.Config
	// Capture asks a hooked process for a snapshot when it turns into a
	// leak, at most once per CaptureEvery.
	Capture      bool
	CaptureEvery time.Duration
	// CompactEvery is how often the history is compacted.
	CompactEvery time.Duration
	// Log receives one line per event worth an operator's eye (a new
	// verdict, a lost GPU, a capture); nil discards them.
	Log io.Writer
}

// Process is one process on one GPU, as the agent last saw it.
type Process struct {
	// Key names the series: "GPU-uuid/pid/start".
	Key  string `json:"key"`
	GPU  int    `json:"gpu"`
	UUID string `json:"uuid"`
	// Instance is the MIG GPU instance, -1 when none.
	Instance int `json:"gpu_instance"`
	proc.Identity
	UsedBytes uint64         `json:"used_bytes"`
	Verdict   verdict.Result `json:"verdict"`
	FirstSeen time.Time      `json:"first_seen"`
	LastSeen  time.Time      `json:"last_seen"`
	// LeakSince is when the verdict last turned to leak; zero otherwise.
	LeakSince time.Time `json:"leak_since"`
	// Capture is the last capture's findings, CaptureErr why it failed.
	Capture    *dump.Result `json:"capture,omitempty"`
	CaptureErr string       `json:"capture_error,omitempty"`
	Hooked     bool         `json:"hooked"`

	window    *verdict.Window
	capturing bool
	lastTry   time.Time
}

// State is a copy of what the agent knows, for /metrics and the page.
type State struct {
	Time      time.Time
	Driver    string
	Devices   []gpu.Device
	Processes []Process // by GPU, then pid
	// Counters since the agent started.
	Samples       uint64
	SampleSeconds float64
	NVMLErrors    map[string]uint64 // by NVML call
	Captures      map[string]uint64 // by result: ok, error
	// Up is false when the last sample could not count the devices.
	Up bool
}

// Agent samples and judges.
type Agent struct {
	cfg   Config
	src   Source
	procs Procs
	store *history.Store // nil: no history
	capt  Capturer       // nil: no captures

	mu        sync.Mutex
	state     State
	live      map[string]*Process
	idents    map[int]proc.Identity // by pid, for the current start
	compacted time.Time
	captures  sync.WaitGroup
	ctx       context.Context
}

// New makes an agent. store and capt may be nil.
func New(cfg Config, src Source, procs Procs, store *history.Store, capt Capturer) (*Agent, error) {
	if err := cfg.Verdict.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return &Agent{
		cfg: cfg, src: src, procs: procs, store: store, capt: capt,
		state:  State{NVMLErrors: map[string]uint64{}, Captures: map[string]uint64{}},
		live:   map[string]*Process{},
		idents: map[int]proc.Identity{},
		ctx:    context.Background(),
	}, nil
}

// Run samples every interval until ctx ends, then waits for captures in
// flight and flushes the history.
func (a *Agent) Run(ctx context.Context, interval time.Duration) error {
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		a.Step(time.Now())
		select {
		case <-ctx.Done():
			a.captures.Wait()
			if a.store != nil {
				return a.store.Flush()
			}
			return nil
		case <-tick.C:
		}
	}
}

// Wait waits for the captures in flight.
func (a *Agent) Wait() { a.captures.Wait() }

// Step takes one sample at now and updates everything that follows from it.
func (a *Agent) Step(now time.Time) {
	began := time.Now()
	smp, err := a.src.Sample(now)

	a.mu.Lock()
	defer a.mu.Unlock()
	st := &a.state
	st.Samples++
	for _, e := range smp.Errors {
		st.NVMLErrors[e.Op]++
	}
	wasUp := st.Up
	st.Time, st.Up = now, err == nil
	if err != nil {
		if wasUp || st.Samples == 1 {
			fmt.Fprintf(a.cfg.Log, "%s nvml: %v\n", stamp(now), err)
		}
		st.SampleSeconds += time.Since(began).Seconds()
		return
	}
	a.noteDevices(now, smp.Devices)
	st.Driver, st.Devices = smp.Driver, smp.Devices

	seen := map[string]bool{}
	down := map[int]bool{}
	for _, d := range smp.Devices {
		if !d.Up {
			down[d.Index] = true
			continue
		}
		if a.store != nil {
			a.storeAdd("d/"+d.UUID, now, int64(d.Memory.Used))
		}
		for _, gp := range d.Processes {
			p := a.process(now, d, gp)
			seen[p.Key] = true
			p.UsedBytes, p.LastSeen = gp.UsedBytes, now
			p.window.Add(now, gp.UsedBytes)
			a.judge(now, p)
			if a.store != nil {
				a.storeAdd("p/"+p.Key, now, int64(gp.UsedBytes))
			}
		}
	}
	// A process missing from an up device has ended: its series ends.
	// One on a device that could not be read is kept until it is.
	for key, p := range a.live {
		if !seen[key] && !down[p.GPU] {
			delete(a.live, key)
			fmt.Fprintf(a.cfg.Log, "%s gpu%d pid %d (%s%s) ended: %s, %s\n", stamp(now), p.GPU, p.PID, p.Command, rankText(p.Identity), p.Verdict.Verdict, mib(p.UsedBytes))
		}
	}
	for pid, id := range a.idents {
		if !a.pidLive(pid, id.StartTicks) {
			delete(a.idents, pid)
			a.procs.Forget(pid)
		}
	}
	if a.store != nil && now.Sub(a.compacted) >= a.cfg.CompactEvery {
		a.compacted = now
		if err := a.store.Compact(now); err != nil {
			fmt.Fprintf(a.cfg.Log, "%s history: %v\n", stamp(now), err)
		}
	}
	st.SampleSeconds += time.Since(began).Seconds()
}

func (a *Agent) pidLive(pid int, start uint64) bool {
	for _, p := range a.live {
		if p.PID == pid && p.StartTicks == start {
			return true
		}
	}
	return false
}

// noteDevices logs devices that went down or came back.
func (a *Agent) noteDevices(now time.Time, ds []gpu.Device) {
	before := map[int]bool{}
	for _, d := range a.state.Devices {
		before[d.Index] = d.Up
	}
	for _, d := range ds {
		if up, ok := before[d.Index]; (!ok || up) && !d.Up {
			fmt.Fprintf(a.cfg.Log, "%s gpu%d %s down: %s\n", stamp(now), d.Index, d.UUID, d.Err)
		} else if ok && !up && d.Up {
			fmt.Fprintf(a.cfg.Log, "%s gpu%d %s back\n", stamp(now), d.Index, d.UUID)
		}
	}
}

func (a *Agent) storeAdd(id string, now time.Time, v int64) {
	if err := a.store.Add(id, now, v); err != nil {
		fmt.Fprintf(a.cfg.Log, "%s history: %v\n", stamp(now), err)
	}
}

// identity names pid, reading /proc only for a pid not seen before or one
// whose start changed (the pid was reused). A pid this agent cannot see
// (another pid namespace) is named by its number alone.
func (a *Agent) identity(pid int) proc.Identity {
	start, err := a.procs.StartTicks(pid)
	if err != nil {
		return proc.Identity{PID: pid}
	}
	if id, ok := a.idents[pid]; ok && id.StartTicks == start {
		return id
	}
	id, err := a.procs.Read(pid)
	if err != nil {
		return proc.Identity{PID: pid}
	}
	a.idents[pid] = id
	return id
}

// process returns the live process for gp on d, starting it (and its
// window, primed from the history after a restart) when it is new.
func (a *Agent) process(now time.Time, d gpu.Device, gp gpu.Process) *Process {
	id := a.identity(int(gp.PID))
	key := d.UUID + "/" + strconv.Itoa(id.PID) + "/" + strconv.FormatUint(id.StartTicks, 10)
	if p, ok := a.live[key]; ok {
		return p
	}
	p := &Process{
		Key: key, GPU: d.Index, UUID: d.UUID, Instance: gp.Instance, Identity: id,
		FirstSeen: now, window: verdict.NewWindow(a.cfg.Verdict), Hooked: dump.Hooked(id),
	}
	if a.store != nil && id.StartTicks != 0 {
		// The same process seen before a restart of the agent: its
		// window goes on where it was.
		if ps, err := a.store.Range("p/"+key, now.Add(-a.cfg.Verdict.Window), now); err == nil && len(ps) > 0 {
			for _, pt := range ps {
				p.window.Add(pt.T, uint64(pt.Last))
			}
			p.FirstSeen = ps[0].T
		}
		meta, _ := json.Marshal(struct {
			GPU  int    `json:"gpu"`
			UUID string `json:"uuid"`
			proc.Identity
		}{d.Index, d.UUID, id})
		a.store.SetMeta("p/"+key, meta)
	}
	a.live[key] = p
	fmt.Fprintf(a.cfg.Log, "%s gpu%d pid %d (%s%s) started: %s\n", stamp(now), d.Index, id.PID, id.Command, rankText(id), mib(gp.UsedBytes))
	return p
}

// judge updates p's verdict, and captures a leaking hooked process: when
// it turns into a leak, and again every CaptureEvery while it stays one
// (a capture that failed, say before the hook armed, is retried then).
func (a *Agent) judge(now time.Time, p *Process) {
	old := p.Verdict.Verdict
	p.Verdict = p.window.Judge()
	v := p.Verdict.Verdict
	if v != old {
		if v == verdict.Leak {
			p.LeakSince = now
		} else {
			p.LeakSince = time.Time{}
		}
		if v != verdict.Pending && old != "" {
			fmt.Fprintf(a.cfg.Log, "%s gpu%d pid %d (%s%s): %s -> %s, %s, %+.1f MiB/min, steadiness %.2f\n",
				stamp(now), p.GPU, p.PID, p.Command, rankText(p.Identity), old, v, mib(p.UsedBytes), p.Verdict.BytesPerMinute/(1<<20), p.Verdict.Steadiness)
		}
	}
	if v == verdict.Leak && a.cfg.Capture && a.capt != nil && p.Hooked && !p.capturing &&
		(p.lastTry.IsZero() || now.Sub(p.lastTry) >= a.cfg.CaptureEvery) {
		a.startCapture(now, p)
	}
}

// startCapture captures p in the background; the caller holds a.mu.
func (a *Agent) startCapture(now time.Time, p *Process) {
	p.capturing, p.lastTry = true, now
	id, key, ctx := p.Identity, p.Key, a.ctx
	a.captures.Go(func() {
		res, err := a.capt.Capture(ctx, id)
		a.finishCapture(key, res, err)
	})
}

func (a *Agent) finishCapture(key string, res *dump.Result, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	result := "ok"
	if err != nil {
		result = "error"
	}
	a.state.Captures[result]++
	p, ok := a.live[key]
	if !ok {
		return // it ended meanwhile
	}
	p.capturing = false
	if err != nil {
		p.CaptureErr = err.Error()
		fmt.Fprintf(a.cfg.Log, "%s gpu%d pid %d: capture: %v\n", stamp(time.Now()), p.GPU, p.PID, err)
		return
	}
	p.Capture, p.CaptureErr = res, ""
	line := "no finding with a callsite"
	if f := res.Top(); f != nil {
		line = fmt.Sprintf("%s at %s:%d", f.Title, f.Callsite.File, f.Callsite.Line)
	}
	fmt.Fprintf(a.cfg.Log, "%s gpu%d pid %d: captured %s: %s: %s\n", stamp(time.Now()), p.GPU, p.PID, res.Dump, res.Verdict, line)
}

// CaptureNow captures pid now (the page's "dump" button) and keeps the
// result with each of its series, waiting for it.
func (a *Agent) CaptureNow(ctx context.Context, pid int) (*dump.Result, error) {
	if a.capt == nil {
		return nil, errors.New("captures are off")
	}
	a.mu.Lock()
	var id *proc.Identity
	for _, p := range a.live {
		if p.PID == pid {
			id = &p.Identity
			break
		}
	}
	a.mu.Unlock()
	if id == nil {
		return nil, fmt.Errorf("pid %d: not a GPU process on this node", pid)
	}
	res, err := a.capt.Capture(ctx, *id)
	a.mu.Lock()
	var keys []string
	for key, p := range a.live {
		if p.PID == pid {
			keys = append(keys, key)
		}
	}
	a.mu.Unlock()
	for _, key := range keys {
		a.finishCapture(key, res, err)
	}
	return res, err
}

// State returns a copy of the agent's state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state
	st.Devices = slices.Clone(st.Devices)
	st.NVMLErrors = maps.Clone(st.NVMLErrors)
	st.Captures = maps.Clone(st.Captures)
	st.Processes = make([]Process, 0, len(a.live))
	for _, p := range a.live {
		st.Processes = append(st.Processes, *p)
	}
	slices.SortFunc(st.Processes, func(x, y Process) int {
		return cmp.Or(cmp.Compare(x.GPU, y.GPU), cmp.Compare(x.PID, y.PID), cmp.Compare(x.Key, y.Key))
	})
	return st
}

// Recent returns the samples of a live series' verdict window (unix
// milliseconds and bytes); ok is false for a series that is not live.
func (a *Agent) Recent(key string) (times, values []int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.live[key]
	if !ok {
		return nil, nil, false
	}
	times, values = p.window.Samples()
	return times, values, true
}

// Store is the agent's history, nil when it keeps none.
func (a *Agent) Store() *history.Store { return a.store }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func rankText(id proc.Identity) string {
	if id.Rank == nil {
		return ""
	}
	return fmt.Sprintf(", rank %d", *id.Rank)
}
