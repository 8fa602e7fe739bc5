package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/capture"
	"github.com/vramscope/vramscope/internal/units"
)

// recordFlags are record's options: what the hook records, and analyze's
// flags for the answer.
type recordFlags struct {
	capture.Settings
	steps     string
	noAnalyze bool
	analyze   analyzeFlags
}

// commandExit carries the recorded command's exit status out of record.
type commandExit struct{ st capture.Status }

func (e *commandExit) Error() string { return "the command " + e.st.String() }

// ExitCode is the status vramscope exits with: the command's own.
func (e *commandExit) ExitCode() int { return e.st.Code }

func newRecordCommand(stdout, stderr io.Writer) *cobra.Command {
	fl := recordFlags{Settings: capture.DefaultSettings()}
	cmd := &cobra.Command{
		Use:   "record [flags] -- COMMAND [ARGS...]",
		Short: "Run a PyTorch program with memory recording injected, then analyze what it dumped",
		Long: `Record runs COMMAND (python train.py, torchrun ..., a server launcher) with
vramscope's Python hook injected through PYTHONPATH (as sitecustomize.py,
which then runs any sitecustomize it shadows), without changing the
program. In every process that imports torch and initializes CUDA, the hook
records the allocator's history and writes, under --out:

  step{N}/{tag}_rank{R}_pid{P}.pickle          at the end of the --steps (optimizer steps)
  {YYYYmmdd-HHMMSS}/{tag}_rank{R}_pid{P}.pickle  every --interval, and on SIGUSR1
  oom/{tag}_rank{R}_pid{P}.pickle and _oom.txt  at the first out-of-memory error, with its message
  final/{tag}_rank{R}_pid{P}.pickle            at exit (--final auto: when nothing else was dumped)
  {tag}_rank{R}_pid{P}_memory_log.csv          memory allocated/reserved each step or --log-interval

Rank comes from torch.distributed, RANK or LOCAL_RANK; the tag from --tag or
the script's name. Files appear only whole (written aside, then renamed).
Processes that never import torch, or never use CUDA, are left alone.

When COMMAND exits, record lists what was written and analyzes the folder
as analyze does (unless --no-analyze). The exit status is COMMAND's (128+N
when signal N killed it), or 3 when the gate (--fail-on, --max-growth,
--max-peak) trips. Ctrl-C reaches COMMAND, and record waits for it; SIGTERM
and SIGHUP are passed on; SIGUSR1 sent to record makes every recording
process dump a snapshot.

The same hook is a Python module for explicit control: see vramscope hook.`,
		Example: `  vramscope record -- python train.py --epochs 1
  vramscope record --fail-on leak -- pytest tests/gpu
  vramscope record --steps 10,20,30 --out runs/mem -- torchrun --nproc-per-node 8 train.py
  vramscope record --steps none --interval 5m -- python -m my_server`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRecord(cmd.Context(), stdout, stderr, args, fl)
		},
	}
	f := cmd.Flags()
	// Everything after COMMAND is COMMAND's, with or without "--".
	f.SetInterspersed(false)
	f.StringVar(&fl.Out, "out", "", "folder to write to (default ./vramscope-YYYYmmdd-HHMMSS)")
	f.StringVar(&fl.Tag, "tag", "", "name prefix of every file (default: the script's name)")
	f.StringVar(&fl.Stacks, "stacks", fl.Stacks, "stacks to record: python, or all (adds C++ frames; much slower)")
	f.IntVar(&fl.MaxEntries, "max-entries", fl.MaxEntries, "allocator events kept per device (a ring buffer; sizes each snapshot)")
	f.BoolVar(&fl.NoHistory, "no-history", false, "record no allocator history (snapshots hold the state only; no slowdown)")
	f.StringVar(&fl.steps, "steps", "2,3,4", "optimizer steps after which to dump a snapshot, or none")
	f.IntVar(&fl.Every, "every", 0, "also dump after every N-th step")
	f.DurationVar(&fl.Interval, "interval", 0, "also dump this often (e.g. 5m), for programs without an optimizer")
	f.DurationVar(&fl.LogInterval, "log-interval", 0, "sample the memory log this often (default: each step)")
	f.BoolVar(&fl.NoLog, "no-log", false, "write no memory log")
	f.StringVar(&fl.Signal, "signal", fl.Signal, "signal that makes a process dump: USR1, USR2 or none")
	f.BoolVar(&fl.NoOOM, "no-oom", false, "no snapshot at an out-of-memory error")
	f.BoolVar(&fl.ModuleNames, "module-names", false, "tag each module forward's allocations with its qualified name (torch >= 2.10), for breakdown --by module")
	f.StringVar(&fl.Final, "final", fl.Final, "dump at exit: auto (when nothing else was dumped), always or never")
	f.BoolVar(&fl.noAnalyze, "no-analyze", false, "only record; do not analyze")
	fl.analyze.register(cmd)
	return cmd
}

func runRecord(ctx context.Context, stdout, stderr io.Writer, argv []string, fl recordFlags) error {
	steps, err := parseSteps(fl.steps)
	if err != nil {
		return err
	}
	fl.Steps = steps
	if fl.Out == "" {
		fl.Out = "vramscope-" + time.Now().Format("20060102-150405")
	}
	if fl.Out, err = filepath.Abs(fl.Out); err != nil {
		return err
	}
	// Check analyze's flags before the command runs for an hour.
	if _, err := fl.analyze.filter(); err != nil {
		return err
	}

	if earlier, err := capture.Collect(fl.Out); err == nil && len(earlier) > 0 {
		fmt.Fprintf(stderr, "vramscope: %s already holds %s from an earlier run; they will be analyzed too\n",
			fl.Out, units.Plural(len(earlier), "file"))
	}
	st, err := capture.Run(argv, fl.Settings, os.Stdin, stdout, stderr)
	if err != nil {
		return fmt.Errorf("running %s: %w", argv[0], err)
	}
	fmt.Fprintf(stderr, "vramscope: %s %s after %s\n", argv[0], st, st.Elapsed.Round(100*time.Millisecond))
	files, err := capture.Collect(fl.Out)
	if err != nil {
		return err
	}
	writeRecorded(stderr, fl.Out, files)

	var answer error
	if !fl.noAnalyze && len(files) > 0 {
		// Ctrl-C meant for the command may have cancelled ctx; the answer
		// gets a context of its own, which a new Ctrl-C cancels.
		actx, stop := signal.NotifyContext(context.WithoutCancel(ctx), os.Interrupt)
		answer = runAnalyze(actx, stdout, stderr, []string{fl.Out}, fl.analyze)
		stop()
	}
	if _, ok := errors.AsType[*gateError](answer); ok {
		return answer
	}
	if st.Code != 0 {
		if answer != nil {
			fmt.Fprintf(stderr, "vramscope: %v\n", answer)
		}
		return &commandExit{st: st}
	}
	return answer
}

// parseSteps reads --steps: "2,3,4", or "none".
func parseSteps(s string) ([]int, error) {
	if s = strings.TrimSpace(s); s == "" || s == "none" {
		return nil, nil
	}
	var steps []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--steps %q: want step numbers from 1, such as 2,3,4, or none", s)
		}
		steps = append(steps, n)
	}
	return steps, nil
}

// writeRecorded lists what the hook wrote, or says why there is nothing.
func writeRecorded(w io.Writer, out string, files []capture.File) {
	if len(files) == 0 {
		fmt.Fprintf(w, "vramscope: nothing recorded in %s: no process initialized CUDA from Python with the hook loaded (python -I and -S skip it)\n", out)
		return
	}
	fmt.Fprintf(w, "vramscope: recorded in %s:\n", out)
	for _, f := range files {
		fmt.Fprintf(w, "  %-50s %10s  %s\n", f.Rel, units.Bytes(f.Size), f.Kind)
	}
}
