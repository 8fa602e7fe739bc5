// Vramscope tells why PyTorch GPU memory grows, fragments or runs out, and
// which line of code caused it, from the snapshots that
// torch.cuda.memory._dump_snapshot writes, memory-log CSVs,
// torch.cuda.memory_summary() dumps and CUDA OOM messages.
//
// Usage:
//
//	vramscope COMMAND [flags] PATH...
//
// A PATH is a snapshot pickle, optionally compressed with gzip or zstd
// (recognized by content, not by name), "-" for standard input, a
// directory (searched recursively) or a quoted glob. Directories and globs
// contribute the snapshots among their files; analyze also takes their
// memory logs and text dumps, and the others are skipped with a note on
// standard error. Names like step2/actor_rank0_pid746.pickle or
// 20250601-1200/actor_rank0_pid746.pickle (verl's memory snapshot sampler)
// give each file a tag, rank, pid, step or dump time, and the files of one
// directory are read in step, time and rank order.
//
// A callsite is the first frame of user code in a stack: torch, installed
// packages, the standard library and C++ frames are skipped. --focus and
// --ignore (regexps of files or functions) adjust which frames count.
//
// Standard output carries only the report; progress bars (for files of 64
// MiB or more, when standard error is a terminal), notes and errors go to
// standard error. Every report has a --json form.
//
// Each example below runs in this repository's root on the fixtures it
// ships; doc_test.go runs them all.
//
// # analyze
//
// Analyze answers "does this job leak, fragment or run out of memory, and
// where?". It groups its inputs into processes (rank and pid from the
// names), orders each process's snapshots by step and compares them:
// callsites whose live bytes grow steadily are leaks, cached memory
// (reserved minus allocated) that grows steadily beyond 1.5x the peak
// allocated is fragmentation. Each trace adds its peak and OOMs; memory
// logs give the same verdicts from their totals. It prints a verdict per
// process and overall (oom, leak, fragmentation or healthy) and the
// findings, each with its callsite, a short stack, the evidence and the
// fix. --fail-on, --max-growth and --max-peak make it a CI gate.
//
//	$ vramscope analyze testdata/scenarios/out/leak_closure
//	$ vramscope analyze --json testdata/scenarios/out/two_procs
//	$ vramscope analyze --fail-on leak testdata/scenarios/out/leak_closure   # exits 3
//
// # stats
//
// Stats answers "what is in this snapshot?": per device and allocator pool,
// reserved, allocated, active and requested bytes (equal to
// torch.cuda.memory_stats() at the dump), segment and block counts,
// internal waste, free bytes in partly used segments (which empty_cache()
// cannot release) versus fully free ones (which it can), the largest free
// block, trace events by action and their time span, and the caveats that
// limit what the file can tell (no stacks, ring buffer wrapped, blocks
// allocated before recording started).
//
//	$ vramscope stats snapshot/testdata/format/default.pickle
//
// # explain
//
// Explain answers "why is the peak this high, where is the free memory
// stuck, and why did this allocation fail?" for each snapshot's devices:
// the blocks live at the allocated peak by callsite, persistent versus
// transient, and the peak without the largest transient; reserved minus
// allocated split into fully free segments, memory trapped in partly used
// ones (and the callsites that pin it), pending frees and private pools;
// and for each OOM, the request, the largest free block and what to
// change.
//
//	$ vramscope explain testdata/scenarios/out/frag_oom/frag_oom.pickle.gz
//
// # oom
//
// Oom answers "what does this CUDA out-of-memory message mean?" without a
// snapshot: it reads the messages of any torch release (the argument,
// --file or standard input) and explains each one's numbers.
//
//	$ vramscope oom --file testdata/scenarios/out/frag_oom/oom_message.txt
//
// # steps
//
// Steps answers "which callsite grows every iteration?" inside one trace:
// it splits the trace into steps (step=N user metadata, record_function
// annotations such as ProfilerStep#N, or the repeating allocation
// pattern), prints the allocated bytes at the end of each step and the
// live bytes per callsite, and reports a leak for each callsite that grows
// by a steady amount in (nearly) every step after the first.
//
//	$ vramscope steps testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz
//
// # export
//
// Export writes what existing viewers open: --pprof a gzipped heap profile
// of the blocks live at the dump (--at end), at each device's allocated
// peak (--at peak) or held by the leaking callsites (--at leak), for go
// tool pprof; --perfetto a Chrome trace-event JSON of memory over time,
// OOMs, annotations and the largest allocations, for ui.perfetto.dev.
//
//	$ vramscope export testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz --pprof leak.pb.gz --at leak
//	$ vramscope export testdata/scenarios/out/two_procs/step4 --perfetto two_procs.json
//
// # diff
//
// Diff answers "what does B hold that A did not?" for two snapshots, two
// runs (processes matched by tag and rank), two ranks (--ranks) or two
// steps (--steps) of one run: at the allocated peak, the end or step N of
// each, the allocated and reserved bytes and the peaks of both, the
// allocator settings and torch versions that differ, and the live bytes
// by callsite (lines merged unless --lines), each row added, removed,
// grown or shrunk. --max-growth makes it a CI gate; --html writes a page.
//
//	$ vramscope diff testdata/scenarios/out/peak_chunked testdata/scenarios/out/peak_upcast
//	$ vramscope diff --at end --max-growth 100MiB testdata/scenarios/out/leak_fixed testdata/scenarios/out/leak_closure   # exits 3
//
// # report and serve
//
// Report writes the analysis as one offline HTML file, and serve shows the
// same views in a browser on demand; see their --help.
//
// # Exit status
//
// 0 when every input was read (and the gate, if any, passed); 1 for a
// usage error (unknown command or flag, bad flag value, wrong number of
// arguments); 2 when an input could not be read or an output file could
// not be written (the message names the file and the reason; the other
// inputs are still reported); 3 when analyze's gate (--fail-on,
// --max-growth, --max-peak) or diff's (--max-growth) trips.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK         = 0
	exitUsage      = 1
	exitInputError = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Stdout, os.Stderr, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the command line args, writing the report to stdout and
// progress, warnings and errors to stderr, and returns the exit code.
func run(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	root := &cobra.Command{
		Use:   "vramscope",
		Short: "Tell why PyTorch GPU memory grows, fragments or runs out, and which line of code caused it",
		// Errors are printed once, below, with the exit code that fits them.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newStatsCommand(stdout, stderr))
	root.AddCommand(newStepsCommand(stdout, stderr))
	root.AddCommand(newBreakdownCommand(stdout, stderr))
	root.AddCommand(newExplainCommand(stdout, stderr))
	root.AddCommand(newOOMCommand(stdout))
	root.AddCommand(newAnalyzeCommand(stdout, stderr))
	root.AddCommand(newExportCommand(stderr))
	root.AddCommand(newReportCommand(stderr))
	root.AddCommand(newServeCommand(stderr))
	root.AddCommand(newRecordCommand(stdout, stderr), newHookCommand(stdout))
	root.AddCommand(newWatchCommand(stdout, stderr))
	root.AddCommand(newSimulateCommand(stdout, stderr))
	root.AddCommand(newDiffCommand(stdout, stderr))

	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "vramscope: %v\n", err)
	if _, ok := errors.AsType[*inputError](err); ok {
		return exitInputError
	}
	if _, ok := errors.AsType[*outputError](err); ok {
		return exitInputError
	}
	if _, ok := errors.AsType[*gateError](err); ok {
		return exitGate
	}
	if e, ok := errors.AsType[*commandExit](err); ok {
		return e.ExitCode()
	}
	fmt.Fprintln(stderr, "Run 'vramscope --help' for usage.")
	return exitUsage
}

// inputError reports inputs that could not be read; it exits with code 2.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }
