// Command phases times vramscope's pipeline stages on one snapshot: decode
// (snapshot.ReadFile, as the command reads a file), replay (replay.Devices) and the single-snapshot
// diagnosis (diagnose.Explain per device), then the whole of analyze
// (analyze.AddSnapshot: replay, explain, steps, leaks, digest), reporting
// wall and CPU seconds per phase and the process's peak RSS after each. bench/run.sh records
// whole-command numbers; this splits them so a regression can be placed.
// With -only decode it decodes alone, as bench/run_pairs.sh times two
// builds' decoders side by side; with -only analyze it decodes and
// analyzes, as the command does; with -only findings it decodes and
// replays, then times each of the parts of analyze that read the trace
// and the timeline (run side by side there) one after the other, each on
// every core. -trace writes a runtime execution trace,
// which shows how many cores each stage keeps busy (bench/tracecores
// reads it). -peakheap writes the heap profile of the collection that
// left the most live: what a run holds at its peak, stage by stage.
//
//	go run ./bench/phases [-runs 3] [-only decode|analyze|findings] [-cpuprofile cpu.pb.gz] [-trace t.out] [-peakheap heap.pb.gz] FILE
//	go tool pprof -top -tagfocus phase=replay cpu.pb.gz
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

func main() {
	runs := flag.Int("runs", 1, "repetitions (each in this process; RSS is the process peak)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of all phases to `FILE`")
	only := flag.String("only", "", "run only the `decode` phase, or decode and analyze, or decode, replay and the findings' parts")
	traceOut := flag.String("trace", "", "write a runtime execution trace to `FILE`")
	peakHeapOut := flag.String("peakheap", "", "write the heap profile of the collection that left the most live to `FILE` (run with GOGC=5)")
	flag.Parse()
	if flag.NArg() != 1 || *only != "" && *only != "decode" && *only != "analyze" && *only != "findings" {
		fmt.Fprintln(os.Stderr, "usage: phases [-runs N] [-only decode|analyze|findings] [-cpuprofile F] [-trace F] [-peakheap F] FILE")
		os.Exit(1)
	}
	path := flag.Arg(0)
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	mb := float64(st.Size()) / 1e6
	fmt.Printf("file %s, %.1f MB\n", path, mb)
	fmt.Println("| run | phase | wall s | cpu s | MB/s (wall) | peak RSS MB |")
	fmt.Println("|---:|---|---:|---:|---:|---:|")
	defer record(*cpuprofile, pprof.StartCPUProfile, pprof.StopCPUProfile)()
	defer record(*traceOut, trace.Start, trace.Stop)()
	defer record(*peakHeapOut, startPeakHeap, stopPeakHeap)()
	filter, _ := callsite.NewFilter("", "")
	for r := 1; r <= *runs; r++ {
		var sn *snapshot.Snapshot
		phase(r, "decode", mb, func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			sn, err = snapshot.ReadFile(f, st.Size(), 0, nil)
			return err
		})
		if *only == "decode" {
			continue
		}
		if *only == "analyze" {
			analyzePhase(r, mb, path, sn)
			continue
		}
		if *only == "findings" {
			findingsPhases(r, mb, sn, filter)
			continue
		}
		var tls []*replay.Timeline
		phase(r, "replay", mb, func() (err error) {
			tls, err = replay.Devices(sn)
			return err
		})
		phase(r, "explain", mb, func() error {
			for _, tl := range tls {
				if _, err := diagnose.Explain(sn, tl, filter); err != nil {
					return err
				}
			}
			return nil
		})
		tls = nil
		analyzePhase(r, mb, path, sn)
	}
}

// record starts writing a profile or a trace to path with start, unless
// path is empty, and returns what stops it.
func record(path string, start func(io.Writer) error, stop func()) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = start(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return func() {
		stop()
		f.Close()
	}
}

// analyzePhase runs analyze's work on sn as one phase.
func analyzePhase(run int, mb float64, path string, sn *snapshot.Snapshot) {
	phase(run, "analyze", mb, func() error {
		analyze.New(analyze.Options{}).AddSnapshot(inputs.Input{Path: path}, sn)
		return nil
	})
}

// findingsPhases replays sn, then runs the parts of analyze's work on each
// traced device as phases of their own: the breakdown's read of the events
// and the steps (beside the replay in analyze), then the leak analysis,
// the breakdown's labels and report, and explain (side by side in analyze).
func findingsPhases(run int, mb float64, sn *snapshot.Snapshot, filter *callsite.Filter) {
	var tls []*replay.Timeline
	phase(run, "replay", mb, func() (err error) {
		tls, err = replay.Devices(sn)
		return err
	})
	for _, tl := range tls {
		if tl.Len() < 2 {
			continue
		}
		tr := tl.Trace
		var ev *breakdown.Events
		var steps diagnose.Steps
		phase(run, "events", mb, func() error {
			ev = breakdown.ReadEvents(sn, tl.Device, tr, breakdown.Options{Filter: filter})
			return nil
		})
		phase(run, "steps", mb, func() error {
			steps = diagnose.TraceSteps(sn, tl.Device, tr, filter)
			return nil
		})
		phase(run, "leak", mb, func() error {
			diagnose.Leak(sn, tl, steps, filter).Findings()
			return nil
		})
		phase(run, "report", mb, func() error {
			ev.Report(tl, steps)
			return nil
		})
		phase(run, "explain", mb, func() error {
			_, err := diagnose.ExplainAdvising(sn, tl, filter)
			return err
		})
	}
}

// phase runs f as one phase, in a trace region of its name. The CPU
// profile's samples of f, and of the goroutines it starts, carry the label
// phase=name: go tool pprof -tagfocus phase=analyze shows one phase's,
// parallel work included.
func phase(run int, name string, mb float64, f func() error) {
	w0, c0 := time.Now(), cpu()
	var err error
	pprof.Do(context.Background(), pprof.Labels("phase", name), func(ctx context.Context) {
		trace.WithRegion(ctx, name, func() { err = f() })
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	w, c := time.Since(w0).Seconds(), (cpu() - c0).Seconds()
	fmt.Printf("| %d | %s | %.2f | %.2f | %.0f | %d |\n", run, name, w, c, mb/w, peakRSSMB())
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMB reads VmHWM, the process's peak resident set, from /proc.
func peakRSSMB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%d", &kb)
			return kb / 1024
		}
	}
	return -1
}
