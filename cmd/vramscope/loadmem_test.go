package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// The gate never lets more than its budget be held at once, and lets a
// job estimated at more than all of it run alone.
func TestMemoryGate(t *testing.T) {
	g := newMemoryGate(100, gcAsIs)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			n := gateHold{est: min(int64(10+i*7%150), g.max)}
			g.take(n)
			h := held.Add(n.est)
			for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
			}
			held.Add(-n.est)
			g.release(n)
		})
	}
	wg.Wait()
	if most.Load() > 100 || most.Load() < 10 {
		t.Errorf("at most %d held at once, want 10..100", most.Load())
	}
	// How many of a size it holds at once: what analyze shares the cores
	// among.
	for _, c := range []struct{ est, want int64 }{{10, 10}, {33, 3}, {100, 1}, {0, 100}} {
		if got := g.fits(gateHold{est: c.est}); got != c.want {
			t.Errorf("fits(%d) = %d, want %d", c.est, got, c.want)
		}
	}
}

// While snapshots load, the gate holds the heap under the soft memory
// limit of what they hold, with the collector's own goal off under
// gcLimitOnly; once none loads, both are what they were. What a user set
// in GOGC or GOMEMLIMIT the gate leaves alone, and gcAsIs leaves both.
func TestMemoryGateLimits(t *testing.T) {
	const before = 77 // the collector's goal before the gate, as GOGC would set it
	for _, tc := range []struct {
		gc               gcPolicy
		gogc, gomemlimit string
		limit            int64 // while two snapshots load; -1: as before
		gcOff            bool
	}{
		{gc: gcLimitOnly, limit: heapBase + 500<<20, gcOff: true},
		{gc: gcLimitOnly, gogc: "77", limit: heapBase + 500<<20},
		{gc: gcLimitOnly, gomemlimit: "4GiB", limit: -1},
		{gc: gcLimit, limit: heapBase + 500<<20},
		{gc: gcLimit, gomemlimit: "4GiB", limit: -1},
		{gc: gcAsIs, limit: -1},
	} {
		name := [...]string{gcAsIs: "as-is", gcLimit: "limit", gcLimitOnly: "limit-only"}[tc.gc]
		t.Run(fmt.Sprintf("%s GOGC=%q GOMEMLIMIT=%q", name, tc.gogc, tc.gomemlimit), func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			defer debug.SetGCPercent(debug.SetGCPercent(before))
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
			limitBefore := debug.SetMemoryLimit(-1)
			g := newMemoryGate(1<<40, tc.gc)
			a, b := gateHold{est: 10, heap: 300 << 20}, gateHold{est: 10, heap: 200 << 20}
			g.take(a)
			g.take(b)
			want := tc.limit
			if want < 0 {
				want = limitBefore
			}
			wantGC := before
			if tc.gcOff {
				wantGC = -1
			}
			if limit, gc := collector(); limit != want || gc != wantGC {
				t.Errorf("while two load: memory limit %d, GOGC %d; want %d and %d", limit, gc, want, wantGC)
			}

			// A stream of unknown size beside them lifts both while it
			// loads.
			c := gateHold{est: 10, heap: -1}
			g.take(c)
			if limit, gc := collector(); limit != limitBefore || gc != before {
				t.Errorf("while a stream loads: memory limit %d, GOGC %d; want the %d and %d there were", limit, gc, limitBefore, before)
			}
			g.release(c)
			if limit, gc := collector(); limit != want || gc != wantGC {
				t.Errorf("once the stream loaded: memory limit %d, GOGC %d; want %d and %d", limit, gc, want, wantGC)
			}

			g.release(a)
			g.release(b)
			if got := debug.SetGCPercent(before); got != before {
				t.Errorf("GOGC after: %d, want the %d there was", got, before)
			}
			if got := debug.SetMemoryLimit(-1); got != limitBefore {
				t.Errorf("memory limit after: %d, want the %d there was", got, limitBefore)
			}
		})
	}
}

// While snapshots load, the limit is heapFor's; while one of halfFrom
// bytes or more loads, half the raw bytes loading less what the process
// holds beside the heap, where that is less, on any number of cores.
// Never is it under the floor the last collection's live heap sets.
func TestMemoryGateHalfLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	limitBefore := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(limitBefore)
	g := newMemoryGate(1<<40, gcLimitOnly)
	g.watching = true // afterGC is called here, not by the collector
	hold := func(raw int64) gateHold { return gateHold{est: 10, raw: raw, heap: heapFor(raw)} }
	limit := func() int64 { l, _ := collector(); return l }
	const other = 8 << 20 // the runtime's memory but the heap's
	check := func(what string, live, want int64) {
		t.Helper()
		if live > 0 && !g.afterGC(floorFor(live, other)) {
			t.Fatalf("%s: afterGC ends the watch while snapshots load", what)
		}
		if got := limit(); got != want {
			t.Errorf("%s: limit %d, want %d", what, got, want)
		}
	}

	small := hold(200 << 20)
	g.take(small)
	heapForSmall := heapBase + heapFor(200<<20)
	check("a 200 MiB load", 0, heapForSmall)
	check("a 200 MiB load, 100 MiB live", 100<<20, heapForSmall)
	check("a 200 MiB load, 150 MiB live", 150<<20, floorFor(150<<20, other)) // more than heapFor says

	big := hold(300 << 20)
	g.take(big)
	half := int64(250<<20 - outsideLimit)
	check("and a 300 MiB one", 0, half) // the floor of 150 MiB live is under half
	check("100 MiB live", 100<<20, half)
	check("216 MiB live", 216<<20, floorFor(216<<20, other))
	check("300 MiB live", 300<<20, floorFor(300<<20, other)) // over heapFor's limit too
	check("50 MiB live", 50<<20, half)

	g.release(big)
	check("once the big load is done", 0, heapForSmall)
	g.release(small)
	if got := limit(); got != limitBefore {
		t.Errorf("memory limit after: %d, want the %d there was", got, limitBefore)
	}
	if g.floor != 0 || g.afterGC(floorFor(50<<20, other)) {
		t.Errorf("the floor (%d) or the watch outlast the loads", g.floor)
	}

	runtime.GOMAXPROCS(16)
	g.take(big)
	if got, want := limit(), int64(150<<20-outsideLimit); got != want {
		t.Errorf("a 300 MiB load on 16 cores: limit %d, want half, %d", got, want)
	}
	g.release(big)
}

// The collector itself tells the gate of each collection's end while
// snapshots load, and stops once none does.
func TestMemoryGateWatchesCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	g := newMemoryGate(1<<40, gcLimitOnly)
	h := gateHold{est: 10, raw: 1 << 30, heap: heapFor(1 << 30)}
	g.take(h)
	until := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s", what)
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	until("floor from a collection", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.floor > 0
	})
	g.release(h)
	until("end of the watch", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return !g.watching
	})
}

// collector reads the soft memory limit and GOGC without changing them.
func collector() (limit int64, gcPercent int) {
	limit, gcPercent = debug.SetMemoryLimit(-1), debug.SetGCPercent(-1)
	debug.SetGCPercent(gcPercent)
	return limit, gcPercent
}

// explain, steps and stats analyse each file under the memory limit of
// what it holds, with the collector's own goal left on; after the last,
// both are what they were.
func TestPerFileLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	const path = "../../snapshot/testdata/format/default.pickle"
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	limitBefore, gcBefore := collector()
	var limit int64
	var gc int
	analyse := func(in inputs.Input) (int, error) {
		limit, gc = collector()
		return 0, nil
	}
	text := func(io.Writer, int) error { return nil }
	if err := perFile(t.Context(), io.Discard, io.Discard, []string{path}, false, analyse, text); err != nil {
		t.Fatal(err)
	}
	if want := heapBase + heapFor(st.Size()); limit != want {
		t.Errorf("memory limit while analysing: %d, want %d", limit, want)
	}
	if gc != gcBefore {
		t.Errorf("GOGC while analysing: %d, want the %d there was", gc, gcBefore)
	}
	if got := debug.SetMemoryLimit(-1); got != limitBefore {
		t.Errorf("memory limit after: %d, want the %d there was", got, limitBefore)
	}
}

// export and simulate keep what they load: their gate never makes a load
// wait on another's release, however big, and its limit counts every load
// held until they end.
func TestKeepingGate(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	limitBefore := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(limitBefore)
	g := keepingGate()
	var held []gateHold
	taken := make(chan struct{})
	go func() {
		for range 8 {
			h := gateHold{est: memoryEstimate(1 << 50), heap: 10 << 20} // a petabyte each
			g.take(h)
			held = append(held, h)
		}
		close(taken)
	}()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatal("a load waited for another's release")
	}
	if got, want := debug.SetMemoryLimit(-1), int64(heapBase+8*(10<<20)); got != want {
		t.Errorf("memory limit with 8 loads kept: %d, want %d", got, want)
	}
	for _, h := range held {
		g.release(h)
	}
	if got := debug.SetMemoryLimit(-1); got != limitBefore {
		t.Errorf("memory limit after: %d, want the %d there was", got, limitBefore)
	}
}

// serve keeps every snapshot it loads, which the limit would not count:
// the snapshots reach it with no limit set and the collector's goal on.
func TestServeLoadsWithoutLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	limitBefore, gcBefore := collector()
	var limit int64
	var gc int
	keep := func(inputs.Input, *snapshot.Snapshot, []*replay.Timeline) {
		limit, gc = collector()
	}
	paths := []string{"../../snapshot/testdata/format/default.pickle"}
	if _, err := loadViews(t.Context(), io.Discard, paths, viewFlags{buckets: 1200}, keep); err != nil {
		t.Fatal(err)
	}
	if limit != limitBefore || gc != gcBefore {
		t.Errorf("while serve loads: memory limit %d, GOGC %d; want the %d and %d there were", limit, gc, limitBefore, gcBefore)
	}
}

// A gzip file's estimate comes from the raw size in its trailer.
func TestRawSize(t *testing.T) {
	path := "../../testdata/scenarios/out/bench_source/bench_source.pickle.gz"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := rawSize(inputs.Input{Path: path}); got != n {
		t.Errorf("raw size %d, want the %d bytes it decompresses to", got, n)
	}
	if got := rawSize(inputs.Input{Path: "../../snapshot/testdata/format/default.pickle"}); got != 22412 {
		t.Errorf("a raw pickle's size: %d, want 22412", got)
	}
	if got := memoryEstimate(-1); got < 1<<40 {
		t.Errorf("a stream is estimated at %d bytes, want all of any budget", got)
	}
}

// runEnv makes the test binary, run as a child, run vramscope with the
// arguments it holds, separated by newlines.
const runEnv = "VRAMSCOPE_TEST_RUN"

// Eight snapshots analyzed together, one at a time (--max-memory holds
// one), peak at what one does plus the digests kept (some 4 MiB each for
// the 26 MB seed: 60 MiB for one, 91 MiB for eight), not eight times
// that; several at a time the output is the same, and --progress counts
// them on stderr.
func TestManySnapshotsFlatMemory(t *testing.T) {
	if args := os.Getenv(runEnv); args != "" {
		code, stdout, stderr := runCmd(strings.Split(args, "\n")...)
		fmt.Print(stdout)
		fmt.Fprint(os.Stderr, stderr)
		os.Exit(code)
	}
	if testing.Short() {
		t.Skip("-short: runs analyze in child processes to measure their peak RSS; the full go test ./... (.ci/run) runs it")
	}
	seed, err := filepath.Abs("../../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	one, eight := t.TempDir(), t.TempDir()
	if err := os.Symlink(seed, filepath.Join(one, "rank0.pickle.gz")); err != nil {
		t.Fatal(err)
	}
	for r := range 8 {
		if err := os.Symlink(seed, filepath.Join(eight, fmt.Sprintf("rank%d.pickle.gz", r))); err != nil {
			t.Fatal(err)
		}
	}
	budget := fmt.Sprint(memoryEstimate(rawSize(inputs.Input{Path: seed})))
	child := func(args ...string) (string, string, int64) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestManySnapshotsFlatMemory$")
		cmd.Env = append(os.Environ(), runEnv+"="+strings.Join(args, "\n"))
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("vramscope %v: %v\n%s", args, err, errOut.String())
		}
		return out.String(), errOut.String(), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	_, _, rss1 := child("analyze", "--json", "--max-memory", budget, one)
	seq, progress, rss8 := child("analyze", "--json", "--progress", "--max-memory", budget, eight)
	t.Logf("peak RSS: one snapshot %d MiB, eight one at a time %d MiB", rss1>>20, rss8>>20)
	if rss8 > rss1*2 {
		t.Errorf("eight snapshots one at a time peaked at %d MiB, one at %d MiB: want less than twice", rss8>>20, rss1>>20)
	}
	if !strings.Contains(progress, "loaded 8/8 snapshots") || strings.Count(progress, "loaded ") != 8 {
		t.Errorf("--progress printed:\n%s\nwant a line per snapshot, the last 'loaded 8/8 snapshots'", progress)
	}
	par, _, _ := child("analyze", "--json", eight)
	if par != seq {
		t.Error("eight snapshots several at a time give another report than one at a time")
	}
}
