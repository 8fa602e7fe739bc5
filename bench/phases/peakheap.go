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

	"github.com/vramscope/vramscope/internal/gcwatch"
)

// peakHeap keeps the heap profile of the collection that left the most
// live (-peakheap): a profile at the end shows what is left, not what
// made the peak. gcwatch tells of each collection's end; with GOGC=5 the
// collections come often enough to catch a peak within a few MiB. The
// profile samples an allocation every 4 KiB.
type peakHeap struct {
	mu   sync.Mutex
	w    io.Writer
	best uint64
	prof bytes.Buffer
	done bool
}

var peak peakHeap

func startPeakHeap(w io.Writer) error {
	runtime.MemProfileRate = 4 << 10
	peak.w = w
	gcwatch.Each(peak.collected)
	return nil
}

// collected keeps the profile if the collection just ended left the most
// live so far, until the run stops.
func (p *peakHeap) collected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
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
	return true
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
