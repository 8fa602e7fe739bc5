package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// A mapped file (the GPU-made bench seed, 26 MB, written out raw) decodes
// split in place to the sequential snapshot, with its passed pages let go.
func TestReadMapped(t *testing.T) {
	raw := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	path := filepath.Join(t.TempDir(), "seed.pickle")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := mapFile(f, int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	var released atomic.Int64
	src := bytesSource{b: m.b, release: func(from, to int64) { released.Add(to - from); m.release(from, to) }}
	got, merged, err := decodeSplit(src, 2, func(size int64, _ int) []int64 { return []int64{size / 2} })
	if err != nil || merged != 1 {
		t.Fatalf("mapped seed: %d tails merged, error %v", merged, err)
	}
	want, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !sameSnapshot(got, want) {
		t.Error("the mapped seed decodes to another snapshot")
	}
	if released.Load() < int64(len(raw))/2 {
		t.Errorf("%d of %d bytes let go", released.Load(), len(raw))
	}

	// In 4 parts, with the walkers reading the file ahead of the decoders
	// and the head skipping what the tails decoded, progress counts what
	// the decoders passed: never more than the file.
	var most, calls atomic.Int64
	progress := func(n int64) {
		calls.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	}
	src = bytesSource{b: m.b, progress: progress, tally: new(passage), file: f}
	if _, merged, err := decodeSplit(src, 4, balancedCuts); err != nil || merged != 3 {
		t.Fatalf("mapped seed in 4 parts: %d tails merged, error %v", merged, err)
	}
	if most.Load() > int64(len(raw)) || calls.Load() < 10 {
		t.Errorf("progress: %d calls, at most %d of %d bytes", calls.Load(), most.Load(), len(raw))
	}

	// A mapped file cut short while it is read: the reads past its new end
	// fault, in both goroutines, and that is an error.
	if err := os.Truncate(path, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := readMapped(m, f, 2, nil); err == nil || !strings.Contains(err.Error(), "did the file change while it was read?") {
		t.Errorf("decoding a mapped file cut short: %v, want a fault turned into an error", err)
	}
}
