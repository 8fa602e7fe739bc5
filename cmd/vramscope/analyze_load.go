package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/memlog"
	"github.com/vramscope/vramscope/pools"
	"github.com/vramscope/vramscope/pools/ledger"
	"github.com/vramscope/vramscope/snapshot"
)

// errNotAnalyzable names what analyze reads, for a file it cannot.
var errNotAnalyzable = errors.New("not a snapshot, memory-log CSV, memory_summary dump, OOM message, serving log or pool ledger")

// loadOptions bound and report the loading of many snapshots.
type loadOptions struct {
	// maxMemory is what the snapshots decoded at once may hold, as
	// estimated (memoryEstimate); 0: half the memory available.
	maxMemory int64
	// progress prints the loading's progress on stderr even when it is not
	// a terminal: a line per snapshot.
	progress bool
	// gc is what the memory gate does to the collector (gcPolicy).
	gc gcPolicy
}

// loadAll feeds every input named by args to a: snapshots, memory logs and
// text dumps, which inputs.ExpandWithLogs finds in directories and globs.
// Other files found there are skipped with one line on stderr; an input
// that cannot be read is reported on stderr and counted in failed.
func loadAll(ctx context.Context, stderr io.Writer, args []string, a *analyze.Analyzer, opts loadOptions) (failed, total int, err error) {
	return loadAllWith(ctx, stderr, args, a, nil, opts)
}

// loadAllWith is loadAll that also hands every decoded snapshot to also,
// when it is not nil, before the snapshot is dropped (the report builds
// its views from it). also may be called concurrently; its error counts
// the input as unreadable.
//
// Snapshots are decoded several at once, one per core at most, for as long
// as their estimated memory fits opts.maxMemory; each is digested and
// dropped as soon as it is decoded, so a folder of snapshots costs what
// the ones decoded at once hold, not their sum. The cores are shared: a
// file is split over the cores (snapshot.ReadFile) that the files left
// do not take. Splitting each of 16 files at once over all 16 cores only
// added the split's walks and merges: analyze of 64 snapshots (3.9 GiB)
// on 16 cores took 194 s of CPU time against 101 s on 2.
func loadAllWith(ctx context.Context, stderr io.Writer, args []string, a *analyze.Analyzer, also snapshotHook, opts loadOptions) (failed, total int, err error) {
	ins, skipped, err := inputs.ExpandWithLogs(args)
	if err != nil {
		return 0, 0, &inputError{msg: err.Error()}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "vramscope: skipped %s (first: %s)\n", units.Plural(len(skipped), "file"), skipped[0])
	}
	readStdin(stderr, ins)
	var snaps, texts []inputs.Input
	for _, in := range ins {
		// Other is a file named on the command line that holds none of
		// the kinds: loadText says so.
		if in.Kind == inputs.Snapshot {
			snaps = append(snaps, in)
		} else {
			texts = append(texts, in)
		}
	}
	total = len(ins)
	a.Expect(ins) // decoded in parallel, digested in any order: the report as if in this one

	var mu sync.Mutex
	report := func(in inputs.Input, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed++
		fmt.Fprintf(stderr, "vramscope: %s: %v\n", in, err)
	}
	for _, in := range texts {
		ok, err := loadText(in, a)
		switch {
		case err != nil:
			report(in, err)
		case !ok:
			report(in, notRead(errNotAnalyzable, inputs.ContentHead(in.Path)))
		}
	}

	maxMemory := opts.maxMemory
	if maxMemory <= 0 {
		maxMemory = defaultMaxMemory()
	}
	gate := newMemoryGate(maxMemory, opts.gc)
	prog := newLoadProgress(stderr, snaps, opts.progress)
	// One file's bar beside others' would garble the terminal: with
	// several, the progress of all is one line.
	barTo := stderr
	if len(snaps) > 1 {
		barTo = io.Discard
	}
	jobs := make(chan inputs.Input)
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(len(snaps), 1))
	var left atomic.Int64 // snapshots not yet loaded
	left.Store(int64(len(snaps)))
	for range workers {
		wg.Go(func() {
			for in := range jobs {
				held := gate.acquire(in)
				// As many as may decode at once: the workers, the files
				// left, the files of this one's size the gate holds.
				at := min(int64(workers), left.Load(), gate.fits(held))
				cores := max(1, runtime.GOMAXPROCS(0)/int(at))
				loadSnapshot(in, barTo, cores, a, also, report)
				left.Add(-1)
				gate.release(held)
				prog.done(in)
			}
		})
	}
	for _, in := range snaps {
		if ctx.Err() != nil {
			break
		}
		jobs <- in
	}
	close(jobs)
	wg.Wait()
	prog.finish()
	return failed, total, ctx.Err()
}

// loadSnapshot decodes one snapshot on cores goroutines at most and hands
// it to a, which keeps only a digest: the snapshot is garbage once this
// returns.
func loadSnapshot(in inputs.Input, stderr io.Writer, cores int, a *analyze.Analyzer, also snapshotHook, report func(inputs.Input, error)) {
	sn, err := load(in, stderr, cores)
	if err != nil {
		report(in, err)
		return
	}
	if also != nil {
		if err := also(in, sn); err != nil {
			report(in, err)
			return
		}
	}
	a.AddSnapshot(in, sn)
}

// snapshotHook receives each decoded snapshot of loadAllWith.
type snapshotHook func(inputs.Input, *snapshot.Snapshot) error

// loadText reads a memory log, memory_summary dump, OOM message file or
// serving log. It returns false, without error, for text of none of these
// kinds.
func loadText(in inputs.Input, a *analyze.Analyzer) (bool, error) {
	served, oom, err := streamServingLog(in, a)
	if err != nil || served && !oom {
		return served, err
	}
	data, err := os.ReadFile(in.Path)
	if err != nil {
		return false, err
	}
	if !served && ledger.Detect(data) {
		l, err := ledger.Read(bytes.NewReader(data))
		if err != nil {
			return false, err
		}
		a.AddPoolLedger(in, l)
		return true, nil
	}
	// A serving log may hold an OOM message too: both are read.
	if !served && pools.Detect(data) {
		served = true
		l, err := pools.Parse(bytes.NewReader(data))
		if err != nil {
			return false, err
		}
		a.AddServingLog(in, l)
	}
	if served && !memlog.ContainsOOM(data) {
		return true, nil
	}
	switch memlog.Detect(data) {
	case memlog.FormatCSV:
		s, err := memlog.ParseCSV(bytes.NewReader(data), in.Path)
		if err != nil {
			return false, err
		}
		a.AddMemoryLog(in, s)
	case memlog.FormatSummary:
		sums, err := memlog.ParseMemorySummaries(bytes.NewReader(data))
		if err != nil {
			return false, err
		}
		a.AddMemorySummaries(in, sums)
	case memlog.FormatOOM:
		msgs, err := memlog.ParseOOMMessages(bytes.NewReader(data))
		if err != nil {
			return false, err
		}
		a.AddOOMMessages(in, msgs)
	default:
		return served, nil
	}
	return true, nil
}

// streamServingLog reads a serving log its first megabyte shows as one
// without holding it in memory (pools.Parse streams it on every core): a
// day of logs from a busy server is hundreds of megabytes. oom says
// whether it mentions an out-of-memory error, for memlog to read.
func streamServingLog(in inputs.Input, a *analyze.Analyzer) (served, oom bool, err error) {
	f, err := os.Open(in.Path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	head, err := io.ReadAll(io.LimitReader(f, inputs.HeadBytes))
	if err != nil || !pools.Detect(head) {
		return false, false, err
	}
	l, err := pools.Parse(io.MultiReader(bytes.NewReader(head), f))
	if err != nil {
		return false, false, err
	}
	a.AddServingLog(in, l)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return true, false, err
	}
	oom, err = mentionsOOM(f)
	return true, oom, err
}

// mentionsOOM reads r in pieces that overlap by the longest word
// memlog.MentionsOOM looks for.
func mentionsOOM(r io.Reader) (bool, error) {
	buf := make([]byte, 1<<20)
	keep := 0
	for {
		n, err := io.ReadFull(r, buf[keep:])
		if memlog.MentionsOOM(buf[:keep+n]) {
			return true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		total := keep + n
		keep = min(memlog.MaxOOMWord-1, total)
		copy(buf, buf[total-keep:total])
	}
}
