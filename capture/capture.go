// Package capture runs a command with vramscope's Python hook injected and
// collects what the hook dumped.
//
// The hook (hook/vramscope_hook.py, embedded) is written to a private
// temporary folder as sitecustomize.py, which goes first on PYTHONPATH, so
// every Python process the command starts loads it at startup; Settings
// reach it as VRAMSCOPE_* variables. The hook arms only in processes that
// import torch and initialize CUDA, and runs the sitecustomize it shadows.
// Run supervises the child: it forwards the signals meant for it, waits,
// and returns its exit status; Collect lists what was written.
package capture

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HookSource is the Python hook: vramscope_hook.py, usable as a module or
// as sitecustomize.py.
//
//go:embed hook/vramscope_hook.py
var HookSource []byte

// ModuleName is the file name the hook has when imported as a module.
const ModuleName = "vramscope_hook.py"

// Settings are what the hook records; each field is one VRAMSCOPE_*
// variable (the hook's Settings class documents the same names).
type Settings struct {
	// Out is the folder the hook writes to; absolute, since the command
	// may change directory.
	Out string
	// Tag names the files ({tag}_rank{R}_pid{P}); empty means the script's name.
	Tag string
	// Stacks is "python" or "all" (adds C++ frames; much slower).
	Stacks string
	// MaxEntries is the allocator history's ring-buffer size.
	MaxEntries int
	// NoHistory turns the allocator history off: snapshots then hold the
	// allocator's state only, and allocation runs at full speed.
	NoHistory bool
	// Steps are the optimizer steps whose end is dumped.
	Steps []int
	// Every dumps every N steps when positive.
	Every int
	// Interval dumps every so often (servers without an optimizer).
	Interval time.Duration
	// LogInterval samples the memory log this often; 0 means once per step.
	LogInterval time.Duration
	// NoLog turns the memory log off.
	NoLog bool
	// Signal is the signal that makes each process dump ("USR1", "USR2"),
	// or "none".
	Signal string
	// NoOOM turns off the snapshot at an out-of-memory error.
	NoOOM bool
	// Final is when to dump at exit: "auto" (only a process that dumped
	// nothing else), "always" or "never".
	Final string
	// ModuleNames tags every module forward's allocations with the
	// module's qualified name (user_metadata "module=NAME", torch >= 2.10),
	// so that breakdown --by module names modules exactly.
	ModuleNames bool
}

// DefaultSettings are record's defaults.
func DefaultSettings() Settings {
	return Settings{
		Stacks:     "python",
		MaxEntries: 1_000_000,
		Steps:      []int{2, 3, 4},
		Signal:     "USR1",
		Final:      "auto",
	}
}

// Check reports the first setting the hook would refuse.
func (s Settings) Check() error {
	switch {
	case s.Out == "":
		return errors.New("no output folder")
	case s.Stacks != "python" && s.Stacks != "all":
		return fmt.Errorf("stacks %q: want python or all", s.Stacks)
	case s.MaxEntries <= 0:
		return fmt.Errorf("max-entries %d: want a positive number", s.MaxEntries)
	case s.Every < 0:
		return fmt.Errorf("every %d: want a positive number", s.Every)
	case s.Interval < 0 || s.LogInterval < 0:
		return errors.New("intervals must not be negative")
	case s.Final != "auto" && s.Final != "always" && s.Final != "never":
		return fmt.Errorf("final %q: want auto, always or never", s.Final)
	}
	if s.Signal != "none" {
		if _, ok := hookSignal(s.Signal); !ok {
			return fmt.Errorf("signal %q: want USR1, USR2 or none", s.Signal)
		}
	}
	for _, n := range s.Steps {
		if n <= 0 {
			return fmt.Errorf("step %d: steps count from 1", n)
		}
	}
	return nil
}

// Env is the settings as VRAMSCOPE_* assignments.
func (s Settings) Env() []string {
	steps := make([]string, len(s.Steps))
	for i, n := range s.Steps {
		steps[i] = strconv.Itoa(n)
	}
	stepList := strings.Join(steps, ",")
	if stepList == "" {
		stepList = "none"
	}
	env := []string{
		"VRAMSCOPE_OUT=" + s.Out,
		"VRAMSCOPE_STACKS=" + s.Stacks,
		"VRAMSCOPE_MAX_ENTRIES=" + strconv.Itoa(s.MaxEntries),
		"VRAMSCOPE_HISTORY=" + onOff(!s.NoHistory),
		"VRAMSCOPE_STEPS=" + stepList,
		"VRAMSCOPE_EVERY=" + strconv.Itoa(s.Every),
		"VRAMSCOPE_INTERVAL=" + seconds(s.Interval),
		"VRAMSCOPE_LOG_INTERVAL=" + seconds(s.LogInterval),
		"VRAMSCOPE_LOG=" + onOff(!s.NoLog),
		"VRAMSCOPE_SIGNAL=" + s.Signal,
		"VRAMSCOPE_OOM=" + onOff(!s.NoOOM),
		"VRAMSCOPE_FINAL=" + s.Final,
		"VRAMSCOPE_MODULE_NAMES=" + onOff(s.ModuleNames),
	}
	if s.Tag != "" {
		env = append(env, "VRAMSCOPE_TAG="+s.Tag)
	}
	return env
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

func onOff(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Environ is base (KEY=VALUE pairs, as os.Environ) with the settings'
// variables and hookDir first on PYTHONPATH. Variables of an outer
// vramscope run are replaced, not inherited.
func Environ(base []string, hookDir string, s Settings) []string {
	env := make([]string, 0, len(base)+16)
	pythonPath := ""
	for _, kv := range base {
		key, value, _ := strings.Cut(kv, "=")
		switch {
		case key == "PYTHONPATH":
			pythonPath = value
		case strings.HasPrefix(key, "VRAMSCOPE_"):
		default:
			env = append(env, kv)
		}
	}
	if pythonPath != "" {
		pythonPath = hookDir + string(os.PathListSeparator) + pythonPath
	} else {
		pythonPath = hookDir
	}
	env = append(env, "PYTHONPATH="+pythonPath)
	return append(env, s.Env()...)
}

// WriteSitecustomize writes the hook as dir/sitecustomize.py.
func WriteSitecustomize(dir string) error {
	return os.WriteFile(filepath.Join(dir, "sitecustomize.py"), HookSource, 0o644)
}

// WriteModule writes the hook as dir/vramscope_hook.py and returns its path.
func WriteModule(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, ModuleName)
	if err := os.WriteFile(path, HookSource, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// Status is how the command ended.
type Status struct {
	// Code is the command's exit code, or 128+N when signal N killed it,
	// as a shell reports it.
	Code int
	// Signal is the signal that killed it, or 0.
	Signal syscall.Signal
	// Elapsed is how long it ran.
	Elapsed time.Duration
}

func (st Status) String() string {
	if st.Signal != 0 {
		return fmt.Sprintf("killed by signal %d (%v)", int(st.Signal), st.Signal)
	}
	return fmt.Sprintf("exited with status %d", st.Code)
}

// Run runs argv with the hook injected and s in its environment, with the
// given standard streams, and waits for it. Signals meant for the command
// reach it (see forwardSignals); notes go to stderr. An error means the
// command could not be started.
func Run(argv []string, s Settings, stdin io.Reader, stdout, stderr io.Writer) (Status, error) {
	if len(argv) == 0 {
		return Status{}, errors.New("no command")
	}
	if err := s.Check(); err != nil {
		return Status{}, err
	}
	if err := os.MkdirAll(s.Out, 0o755); err != nil {
		return Status{}, fmt.Errorf("output folder: %w", err)
	}
	hookDir, err := os.MkdirTemp("", "vramscope-hook-")
	if err != nil {
		return Status{}, fmt.Errorf("hook folder: %w", err)
	}
	defer os.RemoveAll(hookDir)
	if err := WriteSitecustomize(hookDir); err != nil {
		return Status{}, fmt.Errorf("writing the hook: %w", err)
	}

	if _, ok := stderr.(*os.File); !ok {
		// The command's output is copied into stderr while the forwarder
		// writes its notes there. Files stay files, so that the command
		// still sees its terminal.
		stderr = &lockedWriter{w: stderr}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = Environ(os.Environ(), hookDir, s)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// Streams that are not files are copied; a grandchild that keeps them
	// open must not keep vramscope from reporting.
	cmd.WaitDelay = 10 * time.Second
	// Catch the signals before the child exists, so that none kills
	// vramscope in between and leaves the child without its supervisor.
	fw := forwardSignals(s, stderr)
	defer fw.stop()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Status{}, err
	}
	fw.started(cmd.Process)
	err = cmd.Wait()
	st := Status{Elapsed: time.Since(start)}
	ps := cmd.ProcessState
	if ps == nil {
		return st, err
	}
	// An error beside a process state is an I/O copy cut short after the
	// exit (WaitDelay): the status is still the command's.
	st.Code = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = ws.Signal()
		st.Code = 128 + int(ws.Signal())
	}
	return st, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}
