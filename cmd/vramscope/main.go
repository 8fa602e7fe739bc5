// Vramscope diagnoses PyTorch GPU memory problems from the snapshots that
// torch.cuda.memory._dump_snapshot writes.
//
// Usage:
//
//	vramscope stats [--json] FILE...
//
// Each FILE is a snapshot pickle, optionally compressed with gzip or zstd
// (recognized by content, not by name), "-" for standard input, a directory
// (searched recursively; files that are not snapshots, such as logs and
// CSVs, are skipped) or a quoted glob. Names like
// step2/actor_rank0_pid746.pickle or 20250601-1200/actor_rank0_pid746.pickle
// (verl's memory snapshot sampler) give each file a tag, rank, pid, step or
// dump time; the files of one directory are read in step, time and rank
// order.
//
// # stats
//
// Stats prints, per device and per allocator pool (pool id, stream, small or
// large): reserved, allocated, active and requested bytes, which equal
// torch.cuda.memory_stats() at the moment of the dump; segment and block
// counts; internal waste (rounding inside allocated blocks); free bytes in
// partly used segments, which empty_cache() cannot release, versus fully
// free segments, which it can; the largest free block; trace events by
// action and their time span; and the caveats that limit what the file can
// tell (no stacks recorded, ring buffer wrapped, blocks allocated before
// recording started).
//
//	$ vramscope stats snapshot/testdata/format/default.pickle
//	$ vramscope stats --json mem_snapshots/ | jq '.files[].devices[].reserved_bytes'
//
// --json prints {"files": [{"path", "devices": [{"device", "reserved_bytes",
// "allocated_bytes", "active_bytes", "requested_bytes", "segments",
// "blocks", "events": {"alloc": N, ...}, "pools": [...], "caveats": [...]}],
// "caveats": [...]}]}.
//
// Loading a file of 64 MiB or more shows a progress bar on standard error
// when standard error is a terminal. Standard output carries only the
// report.
//
// # analyze
//
//	vramscope analyze [--json] [--fail-on leak,fragmentation,oom] [--max-growth SIZE] [--max-peak SIZE] PATH...
//
// Analyze groups snapshots, memory-log CSVs, memory_summary() dumps and
// OOM messages into processes (rank and pid from the names), orders each
// process's snapshots by step and compares them: callsites whose live
// bytes grow steadily are leaks, cached memory (reserved minus allocated)
// that grows steadily beyond 1.5x the peak allocated is fragmentation.
// Each trace adds its peak and OOMs. It prints a verdict per process and
// overall (oom, leak, fragmentation or healthy) and the findings, each
// with its callsite, a short stack, the evidence and the fix.
//
//	$ vramscope analyze testdata/scenarios/out/leak_closure
//	$ vramscope analyze --json --fail-on leak mem_snapshots/ logs/*.csv
//
// # Exit status
//
// 0 when every input was read, 1 for a usage error, 2 when an input could
// not be read (the message names the file and the reason; the other inputs
// are still reported), 3 when analyze's gate (--fail-on, --max-growth,
// --max-peak) trips.
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
		Short: "Diagnose PyTorch GPU memory from torch.cuda.memory._dump_snapshot pickles",
		// Errors are printed once, below, with the exit code that fits them.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newStatsCommand(stdout, stderr))
	root.AddCommand(newStepsCommand(stdout, stderr))
	root.AddCommand(newExplainCommand(stdout, stderr))
	root.AddCommand(newOOMCommand(stdout))
	root.AddCommand(newAnalyzeCommand(stdout, stderr))
	root.AddCommand(newExportCommand(stderr))
	root.AddCommand(newReportCommand(stderr))
	root.AddCommand(newServeCommand(stderr))

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
	fmt.Fprintln(stderr, "Run 'vramscope --help' for usage.")
	return exitUsage
}

// inputError reports inputs that could not be read; it exits with code 2.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }
