package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
)

// peakHeap keeps the heap profile of the collection that left the most
// live (-peakheap): a profile at the end shows what is left, not what
// made the peak. Each collection's end is told by a cleanup of an object
// nothing holds; with GOGC=5 the collections come often enough to catch
// a peak within a few MiB. The profile samples an allocation every 4 KiB.
type peakHeap struct {
	mu   sync.Mutex
	w    io.Writer
	best uint64
	prof bytes.Buffer
	done bool
}

var peak peakHeap

// gcMark is what the collector frees to tell a collection's end: it
// holds a pointer so that it is not allocated beside small objects whose
// lives would delay its cleanup.
type gcMark struct{ _ *byte }

func startPeakHeap(w io.Writer) error {
	runtime.MemProfileRate = 4 << 10
	peak.w = w
	peak.watch()
	return nil
}

func (p *peakHeap) watch() {
	runtime.AddCleanup(new(gcMark), func(p *peakHeap) { go p.collected() }, p)
}

// collected keeps the profile if the collection just ended left the most
// live so far.
func (p *peakHeap) collected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if live := s[0].Value.Uint64(); live > p.best {
		p.best = live
		p.prof.Reset()
		if err := pprof.Lookup("heap").WriteTo(&p.prof, 0); err != nil {
			fmt.Fprintln(os.Stderr, "peak heap profile:", err)
		}
	}
	p.watch()
}

func stopPeakHeap() {
	peak.mu.Lock()
	defer peak.mu.Unlock()
	peak.done = true
	if _, err := peak.w.Write(peak.prof.Bytes()); err != nil {
		fmt.Fprintln(os.Stderr, "peak heap profile:", err)
	}
	fmt.Fprintf(os.Stderr, "peak heap profile: %.1f MiB live at the largest collection\n", float64(peak.best)/(1<<20))
}
