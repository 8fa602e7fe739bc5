package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/gcwatch"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
)

// memoryGate lets snapshots be decoded at once while their estimated
// memory fits max; one estimated at more than max runs alone. While they
// load, it also keeps the garbage collector's soft memory limit at what
// they hold live (heapFor, or less for big ones: limitNow), as its
// gcPolicy says, unless GOMEMLIMIT sets one: with its default goal of
// twice the live heap the collector let analyze of the 996 MB bench file
// reach 1010 MB; under the limit it peaks at 0.58 of the file
// (bench/RESULTS.md).
type memoryGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	free    int64
	max     int64
	heap    int64 // heapFor of the snapshots loading, with heapBase
	raw     int64 // their raw bytes
	halving int   // how many of them are held under half their size (halfFrom)
	// floor is the least limit the collector keeps without running
	// without end, from the live heap at the last collection's end
	// (afterGC): 0 until one ends while snapshots load.
	floor    int64
	watching bool // the collections' ends are watched (gcwatch.Each)
	// unsized counts the loads of unknown size (streams), for which no
	// limit can be told: while one runs the gate sets none.
	unsized int
	// limit is the soft memory limit before the gate set one, or -1
	// when the gate leaves it alone; gcPercent the collector's GOGC
	// before, which the gate turns off while snapshots load if nothing
	// set it either.
	limit     int64
	gcPercent int
	ownGC     bool // GOGC is the gate's to turn off
	gcOff     bool // and it is off
}

// gcPolicy is what a memoryGate does to the garbage collector while
// snapshots load.
type gcPolicy int

const (
	// gcAsIs leaves it alone: for serve, which keeps the snapshots, that
	// the limit does not count (the collector would run without end).
	gcAsIs gcPolicy = iota
	// gcLimit sets the memory limit: for explain, steps, stats and
	// breakdown, which keep little of each snapshot. Without it their
	// peaks on 16 cores reached 0.51-0.56 of the 996 MB bench file, and
	// explain's 0.58 of a 1 GB generate() trace. The collector's own goal
	// still runs it before the limit where they hold less: with that goal
	// off, stats of the generate() trace peaked at 458 MB instead of 368
	// (2 cores, bench/RESULTS.md).
	gcLimit
	// gcLimitOnly sets the limit and turns the collector's own goal off:
	// for analyze and report, whose live heap nears the limit (hold).
	// report, which replays each snapshot again for its views, peaked at
	// 0.71-0.79 of a 1 GB file without the limit, 0.48-0.49 with it
	// (bench/RESULTS.md).
	gcLimitOnly
)

// keepingGate is the gate of a command that keeps every snapshot it loads
// until it ends (export, simulate): each load holds its share of the limit
// until then, and with no budget to wait on none waits for another's
// release. Without it their peaks on 16 cores reached 0.51 of the 996 MB
// bench file, with it 0.47 (bench/RESULTS.md).
func keepingGate() *memoryGate { return newMemoryGate(math.MaxInt64, gcLimit) }

// newMemoryGate returns a gate of max bytes that does to the collector
// what gc says.
func newMemoryGate(max int64, gc gcPolicy) *memoryGate {
	g := &memoryGate{free: max, max: max, heap: heapBase, limit: -1}
	g.cond = sync.NewCond(&g.mu)
	if gc != gcAsIs && os.Getenv("GOMEMLIMIT") == "" {
		g.limit = debug.SetMemoryLimit(-1)
		g.ownGC = gc == gcLimitOnly && os.Getenv("GOGC") == ""
	}
	return g
}

// The memory limit is heapPerByte bytes per byte of the raw pickles
// loading, plus heapBase for the rest of the process and the digests
// kept. Analyze holds 0.43 bytes live per byte of the 996 MB bench file at
// its peak (427 MB after a collection, on 16 cores; 0.39 on a 1 GB
// generate() trace): under a limit of 476 MB its RSS stays under half the
// file (bench/RESULTS.md), the process holding about 20 MB the limit does
// not count.
const (
	heapPerByte = 0.44
	heapBase    = 36 << 20
)

// heapFor is what loading a snapshot of raw bytes holds live, as the
// memory limit counts it.
func heapFor(raw int64) int64 { return int64(heapPerByte * float64(raw)) }

// acquire waits until the estimate of in (at most max) is free, takes it
// and returns what it took, for release.
func (g *memoryGate) acquire(in inputs.Input) gateHold {
	raw := rawSize(in)
	h := gateHold{est: min(memoryEstimate(raw), g.max), raw: raw, heap: -1}
	if raw >= 0 {
		h.heap = heapFor(raw)
	}
	g.take(h)
	return h
}

// take waits until h.est is free and takes it.
func (g *memoryGate) take(h gateHold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.free < h.est {
		g.cond.Wait()
	}
	g.free -= h.est
	g.hold(h, 1)
}

// gateHold is what acquire took: the estimate, and the load's raw bytes
// and what it holds live (heapFor), or -1 if its size is unknown.
type gateHold struct{ est, raw, heap int64 }

// fits is how many loads of h's estimate the gate holds at once (1 at
// least).
func (g *memoryGate) fits(h gateHold) int64 { return max(1, g.max/max(h.est, 1)) }

func (g *memoryGate) release(h gateHold) {
	g.mu.Lock()
	g.free += h.est
	g.hold(h, -1)
	g.mu.Unlock()
	g.cond.Broadcast()
}

// hold adds h to what the loading snapshots hold (sign 1) or takes it
// away (-1) and sets the memory limit to it; with none loading, or one of
// unknown size, it restores the limit there was. Under a limit of the
// other loads' alone (heapBase, for one stream) the collector ran without
// end: analyze of the 996 MB bench file from standard input ran 3,037
// collections in 9.1 s instead of 4.3.
//
// Under the limit the collector's own goal (twice the live heap) only adds
// collections that free little while a snapshot is built: gcLimitOnly
// turns it off, so that the collector runs when the heap nears the limit
// (on the 996 MB bench file 6.8 s of CPU time instead of 7.8, at the same
// peak).
func (g *memoryGate) hold(h gateHold, sign int64) {
	if h.heap < 0 {
		g.unsized += int(sign)
	} else {
		g.heap += sign * h.heap
		g.raw += sign * h.raw
		if h.raw >= halfFrom {
			g.halving += int(sign)
		}
	}
	if g.free == g.max {
		g.floor = 0
	}
	switch {
	case g.limit < 0:
	case g.free == g.max || g.unsized > 0:
		debug.SetMemoryLimit(g.limit)
		if g.gcOff {
			debug.SetGCPercent(g.gcPercent)
			g.gcOff = false
		}
	default:
		debug.SetMemoryLimit(g.limitNow())
		if !g.watching {
			g.watching = true
			gcwatch.Each(func() bool { return g.afterGC(collected()) })
		}
		if g.ownGC && !g.gcOff {
			g.gcPercent = debug.SetGCPercent(-1)
			g.gcOff = true
		}
	}
}

// Under heapFor's limit a snapshot's heap grows to 0.44 bytes a byte
// plus heapBase before the collector runs, and the process holds about
// outsideLimit more (the binary's pages most of it: 16 MB resident after
// --help on the GPU host; 16-20 MiB over the limit on the dev VM). Below
// about 930 MiB that passes half of the file, which the live heap does
// not from halfFrom on: about 0.38 bytes a byte plus 5 MiB (109 MiB for
// the 288 MB bench file on 2 cores, whose limit was 157 MiB and RSS
// 0.58-0.60 of the file). While a snapshot of that size loads,
// the limit is therefore half the raw bytes less outsideLimit, never
// under what the last collection left (floorFor): at a limit nearer the
// live heap the collector would run without end. That held the 288 MB
// file on 2 cores under half its size in the same time
// (bench/RESULTS.md).
//
// On 16 cores the 288 MB file's decode alone held 130 MiB live, its 16
// parts' memo and event chunks partly filled, their buffers, and the
// replay's 16 batches 7 MB more than 8 (against 121.5 MiB there): the
// collections that chased its live heap took analyze from 0.23 s to
// 0.31-0.35 s. Since the chunks are of 256 KiB and the replay's batches
// are sized by the trace (replay/run.go) it holds 107 MiB live on 16 as
// on 2, and is held to half on every number of cores (bench/RESULTS.md).
const (
	halfFrom     = 256 << 20
	outsideLimit = 16 << 20
)

// limitNow is the memory limit for the snapshots loading (hold, afterGC):
// heapFor's, or half the file where that is less (halfFrom), but never
// under the floor. A load can hold more live than heapFor says: a zstd
// file written with a 128 MiB window (zstd --long) holds that window and
// a copy while it is decompressed, and the 288 MB bench file so written
// held 219 MiB live under a limit of 157 MiB; the collector ran 712 times
// and analyze on 2 cores took 1.6-2.2 s instead of 1.0 (bench/RESULTS.md).
func (g *memoryGate) limitNow() int64 {
	limit := g.heap
	if g.halving > 0 {
		limit = min(limit, g.raw/2-outsideLimit)
	}
	return max(limit, g.floor)
}

// floorFor is the floor (memoryGate.floor) after a collection that left
// live bytes live, beside other bytes the limit counts too (the heap's
// unused span space, goroutine stacks, the collector's metadata: 9 MiB
// on 2 cores): the collector then runs each time the heap has grown a
// sixteenth over the live heap, its goal being what the limit leaves the
// heap less 3% (the runtime's memoryLimitHeapGoal). Without other, the
// collector ran back to back at the 288 MB bench file's peak, its goal no
// higher than its live heap.
func floorFor(live, other int64) int64 { return (live+live/16)*100/97 + other }

// afterGC is told the floor at the end of each collection while the gate
// watches, and sets the limit; false once no snapshot loads, and the watch
// ends.
func (g *memoryGate) afterGC(floor int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free == g.max || g.limit < 0 {
		g.watching = false
		return false
	}
	g.floor = floor
	if g.free < g.max && g.unsized == 0 {
		debug.SetMemoryLimit(g.limitNow())
	}
	return true
}

// collected is the floor (floorFor) after the last collection, from the
// runtime's metrics: the heap it left live, and the memory the runtime
// holds but for the heap's objects and free pages.
func collected() int64 {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(s)
	v := make([]int64, len(s))
	for k := range s {
		if s[k].Value.Kind() == metrics.KindUint64 {
			v[k] = int64(s[k].Value.Uint64())
		}
	}
	return floorFor(v[0], max(0, v[1]-v[2]-v[3]-v[4]))
}

// Analyze's peak resident memory is about rssPerByte bytes per byte of the
// raw pickle it decodes, plus rssBase: 1.01-1.11 without the gate's memory
// limit on snapshots grown from the GPU-made bench seed (bench/RESULTS.md),
// 0.58 with it; the estimate errs high, for a limit the collector cannot
// keep.
const (
	rssPerByte = 1.2
	rssBase    = 32 << 20
)

// memoryEstimate is what decoding and digesting a snapshot of raw bytes
// will hold (rawSize); a stream of unknown size, raw < 0, gets all of the
// budget.
func memoryEstimate(raw int64) int64 {
	if raw < 0 {
		return 1 << 62
	}
	return int64(float64(raw)*rssPerByte) + rssBase
}

// rawSize is the size of the pickle in in (snapshot.RawSize); -1 if it is
// unknown: a stream, which standard input is where it could not be read
// through a file (inputs.SpoolStdin).
func rawSize(in inputs.Input) int64 {
	r, err := in.Open()
	if err != nil {
		return -1
	}
	defer r.Close()
	f, ok := r.File()
	if !ok {
		return -1
	}
	return snapshot.RawSize(f, r.Size())
}

// defaultMaxMemory is half the memory available now (MemAvailable in
// /proc/meminfo), or 4 GiB where that cannot be read.
func defaultMaxMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); err == nil && kb > 0 {
				return kb << 10 / 2
			}
		}
	}
	return 4 << 30
}

// loadProgress reports how many snapshots of how many bytes are loaded, and
// at what rate: one line redrawn on a terminal, or with --progress
// elsewhere a line per snapshot. It is quiet for a single snapshot on a
// terminal, whose own bar shows it (load).
type loadProgress struct {
	w        io.Writer
	redraw   bool // a terminal: one line, rewritten
	mu       sync.Mutex
	files    int
	bytes    int64
	loaded   int
	loadedB  int64
	start    time.Time
	lastDraw time.Time
}

func newLoadProgress(stderr io.Writer, snaps []inputs.Input, always bool) *loadProgress {
	f, ok := stderr.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	if !always && (!tty || len(snaps) < 2) {
		return nil
	}
	p := &loadProgress{w: stderr, redraw: tty, files: len(snaps), start: time.Now()}
	for _, in := range snaps {
		if st, err := os.Stat(in.Path); err == nil {
			p.bytes += st.Size()
		}
	}
	return p
}

// done counts in as loaded (read or not).
func (p *loadProgress) done(in inputs.Input) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loaded++
	if st, err := os.Stat(in.Path); err == nil {
		p.loadedB += st.Size()
	}
	now := time.Now()
	if p.redraw && p.loaded < p.files && now.Sub(p.lastDraw) < 100*time.Millisecond {
		return
	}
	p.lastDraw = now
	line := p.line(now)
	if p.redraw {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintf(p.w, "vramscope: %s (%s)\n", line, in)
	}
}

// line is "12/64 snapshots, 3.20 GiB of 8.00 GiB, 410.00 MiB/s".
func (p *loadProgress) line(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "loaded %d/%d snapshots, %v of %v", p.loaded, p.files, units.Bytes(p.loadedB), units.Bytes(p.bytes))
	if s := now.Sub(p.start).Seconds(); s > 0 {
		fmt.Fprintf(&b, ", %v/s", units.Bytes(int64(float64(p.loadedB)/s)))
	}
	return b.String()
}

// finish ends a redrawn line.
func (p *loadProgress) finish() {
	if p != nil && p.redraw && p.loaded > 0 {
		fmt.Fprintln(p.w)
	}
}
