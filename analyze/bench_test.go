package analyze

import (
	"os"
	"testing"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/snapshot"
)

// BenchmarkAnalyze digests the GPU-made bench seed (26 MB, 330 k trace
// entries) and reports on it: the replay, the per-callsite accounting and
// the findings that follow the decode.
func BenchmarkAnalyze(b *testing.B) {
	f, err := os.Open("../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	if err != nil {
		b.Fatal(err)
	}
	sn, err := snapshot.Read(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	in := inputs.Input{Path: "bench_source.pickle.gz", Kind: inputs.Snapshot}
	for b.Loop() {
		a := New(Options{})
		a.AddSnapshot(in, sn)
		if r := a.Report(); len(r.Processes) != 1 {
			b.Fatalf("%d processes, want 1", len(r.Processes))
		}
	}
}
