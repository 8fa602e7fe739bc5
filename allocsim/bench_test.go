package allocsim

import (
	"os"
	"testing"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// BenchmarkRun replays VRAMSCOPE_BENCH_SNAPSHOT (a grown bench file,
// bench/grow_snapshot.py) under expandable segments.
func BenchmarkRun(b *testing.B) {
	path := os.Getenv("VRAMSCOPE_BENCH_SNAPSHOT")
	if path == "" {
		b.Skip("set VRAMSCOPE_BENCH_SNAPSHOT to a snapshot")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	sn, err := snapshot.Read(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := Record(sn, 0)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := allocator.Parse("expandable_segments:True")
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(sn, rec, s, Config{}); err != nil {
			b.Fatal(err)
		}
	}
}
