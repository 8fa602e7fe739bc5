// Package dump asks a process running under vramscope's capture hook for
// a snapshot, picks the file up and analyzes it with the process's earlier
// dumps, so that a leak seen from outside (NVML) gets its callsite.
package dump

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/snapshot"
	"github.com/vramscope/vramscope/watch/proc"
)

// ErrNotHooked says the process does not run under the capture hook.
var ErrNotHooked = errors.New("not running under the vramscope hook (no " + EnvOut + " in its environment; start it with `vramscope record --`)")

// Hooked reports whether id runs under the hook with its signal on.
func Hooked(id proc.Identity) bool {
	if id.Env[EnvOut] == "" {
		return false
	}
	sig := strings.ToLower(id.Env[EnvSignal])
	return sig != "none" && sig != "off"
}

// Result is what one capture found.
type Result struct {
	Time time.Time `json:"time"`
	PID  int       `json:"pid"`
	// Dump is the new snapshot, Inputs every snapshot analyzed with it (as
	// this process sees them: under /proc/PID/root).
	Dump     string             `json:"dump"`
	Inputs   []string           `json:"inputs"`
	Verdict  analyze.Verdict    `json:"verdict"`
	Findings []diagnose.Finding `json:"findings"`
	// Seconds is how long the capture took, signal to findings.
	Seconds float64 `json:"seconds"`
	// Report is the whole analysis, for `watch --dump`'s text.
	Report *analyze.Report `json:"-"`
}

// Top is the first finding with a callsite, nil when none has one.
func (r *Result) Top() *diagnose.Finding {
	for i := range r.Findings {
		if r.Findings[i].Callsite != nil {
			return &r.Findings[i]
		}
	}
	return nil
}

// Capturer captures and analyzes.
type Capturer struct {
	// ProcRoot is the proc mount the pids are in (/proc, /host/proc).
	ProcRoot string
	// Timeout bounds the wait for the dump: a big trace takes seconds to
	// pickle.
	Timeout time.Duration
	// MaxInputs is how many of the process's latest dumps are analyzed
	// together (more of them compare more steps).
	MaxInputs int
	// Options are analyze's.
	Options analyze.Options
}

// Capture signals id's process, waits for its snapshot and analyzes it.
func (c *Capturer) Capture(ctx context.Context, id proc.Identity) (*Result, error) {
	start := time.Now()
	if !Hooked(id) {
		return nil, fmt.Errorf("pid %d: %w", id.PID, ErrNotHooked)
	}
	out, err := c.outDir(id)
	if err != nil {
		return nil, err
	}
	sig, err := armedSignal(out, id.PID)
	if err != nil {
		return nil, err
	}
	before, err := readNotes(out, id.PID)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(id.PID, sig); err != nil {
		return nil, fmt.Errorf("pid %d: sending %v: %w", id.PID, sig, err)
	}
	notes, err := c.waitDump(ctx, out, id.PID, len(before))
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, n := range notes[max(len(notes)-max(c.MaxInputs, 1), 0):] {
		if p := filepath.Join(out, n.Path); fileExists(p) {
			paths = append(paths, p)
		}
	}
	rep, err := Analyze(paths, c.Options)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", id.PID, err)
	}
	res := &Result{Time: start, PID: id.PID, Dump: filepath.Join(out, notes[len(notes)-1].Path), Inputs: paths, Report: rep}
	if p := processOf(rep, id.PID); p != nil {
		res.Verdict, res.Findings = p.Verdict, p.Findings
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// outDir is the hook's output folder as this process reaches it: through
// /proc/PID/root, so that it works from another mount namespace (watch in
// a container, the job in another), and through /proc/PID/cwd's target
// for a relative folder.
func (c *Capturer) outDir(id proc.Identity) (string, error) {
	out := id.Env[EnvOut]
	pidDir := filepath.Join(c.ProcRoot, strconv.Itoa(id.PID))
	if !filepath.IsAbs(out) {
		cwd, err := os.Readlink(filepath.Join(pidDir, "cwd"))
		if err != nil {
			return "", fmt.Errorf("pid %d: its working directory: %w", id.PID, err)
		}
		out = filepath.Join(cwd, out)
	}
	return filepath.Join(pidDir, "root", out), nil
}

// armedSignal is the signal the hook installed its handler for, from its
// note; without the note the process has no handler (CUDA not initialized
// yet, or the program handles the signal itself) and a signal would kill
// it.
func armedSignal(out string, pid int) (syscall.Signal, error) {
	b, err := os.ReadFile(filepath.Join(out, controlDir, fmt.Sprintf(signalNote, pid)))
	if err != nil {
		return 0, fmt.Errorf("pid %d: the hook has not armed its dump signal (no %s note: CUDA not initialized yet, or the program handles the signal itself): %w", pid, controlDir, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("pid %d: signal note %q: not a signal number", pid, strings.TrimSpace(string(b)))
	}
	return syscall.Signal(n), nil
}

// note is one line of dumps-PID.jsonl.
type note struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func readNotes(out string, pid int) ([]note, error) {
	f, err := os.Open(filepath.Join(out, controlDir, fmt.Sprintf(dumpsNote, pid)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	defer f.Close()
	var notes []note
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n note
		if json.Unmarshal(sc.Bytes(), &n) == nil && n.Path != "" {
			notes = append(notes, n)
		}
		// A line being written when we read is incomplete: skipped now,
		// read whole next time.
	}
	return notes, sc.Err()
}

// waitDump polls the notes until a signal dump follows the first `had`.
func (c *Capturer) waitDump(ctx context.Context, out string, pid, had int) ([]note, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		notes, err := readNotes(out, pid)
		if err != nil {
			return nil, err
		}
		for _, n := range notes[min(had, len(notes)):] {
			if n.Reason == signalReason {
				return notes, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pid %d: no snapshot after %v: %w", pid, c.Timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Analyze runs analyze on snapshot files, as `vramscope analyze` does.
func Analyze(paths []string, opts analyze.Options) (*analyze.Report, error) {
	ins, _, err := inputs.Expand(paths)
	if err != nil {
		return nil, err
	}
	if len(ins) == 0 {
		return nil, errors.New("no snapshot to analyze")
	}
	a := analyze.New(opts)
	for _, in := range ins {
		sn, err := read(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.Path, err)
		}
		a.AddSnapshot(in, sn)
	}
	return a.Report(), nil
}

func read(in inputs.Input) (*snapshot.Snapshot, error) {
	r, err := in.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if f, ok := r.File(); ok {
		return snapshot.ReadFile(f, r.Size(), 0, nil)
	}
	return snapshot.Read(r)
}

// processOf is the report's process for pid, or its only one.
func processOf(rep *analyze.Report, pid int) *analyze.Process {
	for i, p := range rep.Processes {
		if p.PID != nil && *p.PID == pid {
			return &rep.Processes[i]
		}
	}
	if len(rep.Processes) == 1 {
		return &rep.Processes[0]
	}
	return nil
}
