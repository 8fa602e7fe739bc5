package breakdown

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

// benchSeed is the bench seed's snapshot, its device 0 replayed and its
// steps: what bench/ grows to 1 GB.
func benchSeed(b *testing.B) (*replay.Timeline, *Events, diagnose.Steps) {
	sn := testutil.Snapshot(b, filepath.Join("..", "testdata", "scenarios", "out", "bench_source", "bench_source.pickle.gz"))
	tl, err := replay.Device(sn, 0)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := callsite.NewFilter("", "")
	return tl, ReadEvents(sn, tl.Device, tl.Trace, Options{Filter: f}), diagnose.DetectSteps(sn, tl, f)
}

// BenchmarkClassify labels every block of the bench seed's trace, as the
// breakdown, export and report commands do.
func BenchmarkClassify(b *testing.B) {
	tl, ev, _ := benchSeed(b)
	for b.Loop() {
		ev.Classify(tl)
	}
	b.ReportMetric(float64(tl.Len()), "events") // after the loop, whose start drops what was reported
}

// BenchmarkReport takes the bench seed's category totals at its peak, end
// and steps, labelling the blocks live there: what analyze and explain
// run on every traced device.
func BenchmarkReport(b *testing.B) {
	tl, ev, steps := benchSeed(b)
	for b.Loop() {
		ev.Report(tl, steps)
	}
	b.ReportMetric(float64(tl.Len()), "events")
}
