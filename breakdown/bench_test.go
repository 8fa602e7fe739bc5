package breakdown

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

// BenchmarkClassify labels the bench seed's trace (what bench/ grows to
// 1 GB): analyze runs it on every traced device.
func BenchmarkClassify(b *testing.B) {
	sn := testutil.Snapshot(b, filepath.Join("..", "testdata", "scenarios", "out", "bench_source", "bench_source.pickle.gz"))
	tl, err := replay.Device(sn, 0)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := callsite.NewFilter("", "")
	steps := diagnose.DetectSteps(sn, tl, f)
	b.ReportMetric(float64(tl.Len()), "events")
	for b.Loop() {
		Classify(sn, tl, Options{}).Report(steps)
	}
}
