package replay

import (
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// stepTrace builds a training-like trace of about n events in one 1 GiB
// segment: each step allocates 64 blocks of 2-8 MiB back to back, then frees
// the even ones and the odd ones (so frees merge on both sides), leaving the
// segment empty.
func stepTrace(n int) *snapshot.Snapshot {
	const perStep = 64
	evs := make([]snapshot.Event, 0, n+1)
	evs = append(evs, ev(segAlloc, a0, 1<<30))
	var addrs [perStep]uint64
	var sizes [perStep]uint64
	for step := 0; len(evs) < n; step++ {
		addr := a0
		for k := range perStep {
			sizes[k] = (2 + uint64((step+k)%7)) * mib
			addrs[k] = addr
			evs = append(evs, snapshot.Event{Action: alloc, Addr: addr, Size: sizes[k], Stack: snapshot.StackID(2 + k%16)})
			addr += sizes[k]
		}
		for _, parity := range []int{0, 1} {
			for k := parity; k < perStep; k += 2 {
				evs = append(evs, free(addrs[k], sizes[k])...)
			}
		}
	}
	return build([]seg{{addr: a0, size: 1 << 30, blocks: []blk{{1 << 30, 0, inactive}}}}, evs)
}

// BenchmarkReplay replays a one-million-event trace; ns/event compares
// with the decoder's cost per event (about 350 ns on a 1 GB snapshot).
func BenchmarkReplay(b *testing.B) {
	sn := stepTrace(1 << 20)
	n := sn.Traces[0].Len()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tl, err := Device(sn, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(tl.Caveats) != 0 {
			b.Fatal(tl.Caveats)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/event")
}

// BenchmarkGrownReplay replays the 1 GB grown snapshots that bench/run.sh
// makes in bench/out (absent from a checkout: it skips then), and reports
// the Timeline's bytes: the series and the allocation records, which
// issue 15 wants smaller.
func BenchmarkGrownReplay(b *testing.B) {
	paths, _ := filepath.Glob(filepath.Join("..", "bench", "out", "grown_*_1000mb.pickle"))
	if len(paths) == 0 {
		b.Skip("no bench/out/grown_*_1000mb.pickle: bench/run.sh makes them")
	}
	for _, path := range paths {
		b.Run(filepath.Base(path), func(b *testing.B) {
			sn := testutil.Snapshot(b, path)
			var tl *Timeline
			for b.Loop() {
				var err error
				if tl, err = Device(sn, 0); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(tl.Len())
			series := seriesBytes(&tl.allocated) + seriesBytes(&tl.active) + seriesBytes(&tl.waste)
			records := len(tl.allocs)*int(unsafe.Sizeof(allocRecord{})) + len(tl.full)*int(unsafe.Sizeof(Allocation{}))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
			b.ReportMetric(float64(series)/n, "series-B/event")
			b.ReportMetric(float64(series)/1e6, "series-MB")
			b.ReportMetric(float64(records)/1e6, "records-MB")
			b.Logf("%d events, %d allocations (%d full); series: allocated %d, active %d, waste %d bytes", tl.Len(), len(tl.allocs), len(tl.full),
				seriesBytes(&tl.allocated), seriesBytes(&tl.active), seriesBytes(&tl.waste))
		})
	}
}

// seriesBytes is the size of s's arrays.
func seriesBytes(s *series) int {
	n := len(s.blocks)*int(unsafe.Sizeof(seriesBlock{})) + 8*len(s.wide)
	for _, c := range s.high {
		n += 2 * cap(c)
	}
	return n
}
