package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// A mapped file (the GPU-made bench seed, 26 MB, written out raw) decodes
// split in place to the sequential snapshot, with its passed pages let go.
func TestReadMapped(t *testing.T) {
	raw := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	f, path := fileOf(t, t.TempDir(), "seed.pickle", raw)
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

	// In one part, as a decode on one core reads a big file: the head
	// alone, in place, letting go of what it passed.
	released.Store(0)
	got, merged, err = decodeSplit(src, 1, balancedCuts)
	if err != nil || merged != 0 || !sameSnapshot(got, want) {
		t.Fatalf("mapped seed in one part: %d tails merged, error %v, same snapshot %v", merged, err, err == nil && sameSnapshot(got, want))
	}
	if released.Load() < int64(len(raw))/2 {
		t.Errorf("one part: %d of %d bytes let go", released.Load(), len(raw))
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

// written finds how far a writer filling an output mapping has come from
// the page cache, also after its pages are let go, and looks no further
// ahead than its vec has room for.
func TestMappingWritten(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	m, err := mapOutput(f, 64*page)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	vec := make([]byte, 64)
	if got := m.written(0, vec); got != 0 {
		t.Errorf("an empty file: written %d, want 0", got)
	}
	for i := range 10 * page {
		m.b[i] = byte(i/page + 1)
	}
	for _, tc := range []struct {
		name     string
		from     int64
		vec      int
		released bool
		want     int64
	}{
		{"ten pages", 0, 64, false, 10 * page},
		{"from the fifth", 5 * page, 64, false, 10 * page},
		{"from inside a page", 5*page + 7, 64, false, 10 * page},
		{"three pages of room", 0, 3, false, 3 * page},
		{"past the writer", 12 * page, 64, false, 12 * page},
		{"let go", 0, 64, true, 10 * page},
	} {
		if tc.released {
			m.release(0, 10*page)
		}
		if got := m.written(tc.from, vec[:tc.vec]); got != tc.want {
			t.Errorf("%s: written %d pages, want %d", tc.name, got/page, tc.want/page)
		}
	}
	// What was let go is the file's still, and the mapping reads it again.
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 3*page); err != nil || b[0] != 4 || m.b[9*page] != 10 {
		t.Errorf("after release: the file holds %d (%v) at page 3, the mapping %d at page 9", b[0], err, m.b[9*page])
	}
}

// A zstd file decompresses into a mapped output with the stream's bytes,
// progress up to the file's size and the output cut to the content; a
// damaged stream and a content past twice its estimate are refused.
func TestDecompressMapped(t *testing.T) {
	seed := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	train := readRaw(t, "testdata/format/train.pickle")
	f, size := compressedFile(t, t.TempDir(), "zstd-long", seed)
	if w, est := ZstdWindow(streamHead(f)), RawSize(f, size); !wide(w, est) {
		t.Fatalf("the seed's window, %d, is not wide against its %d bytes", w, est)
	}
	pz, err := os.Open("testdata/redump/train.pzstd.pickle.zst")
	if err != nil {
		t.Fatal(err)
	}
	defer pz.Close()
	pzInfo, _ := pz.Stat()
	damaged, _ := copied(t, f, size, flipMiddle)
	for _, tc := range []struct {
		name string
		f    *os.File
		size int64
		est  int64
		want []byte // nil: refused
	}{
		{"the bench seed", f, size, RawSize(f, size), seed},
		{"pzstd, skippable frames first", pz, pzInfo.Size(), int64(len(train)), train},
		{"damaged", damaged, size, RawSize(f, size), nil},
		{"over twice the estimate", f, size, int64(len(seed)) / 3, nil},
	} {
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		reached := int64(0)
		raw, mapped, ok := decompressMapped(tc.f, tc.size, out, tc.est, func(off int64) { reached = max(reached, off) })
		if !mapped {
			t.Fatalf("%s: not mapped", tc.name)
		}
		if ok != (tc.want != nil) {
			t.Fatalf("%s: ok %v", tc.name, ok)
		}
		if ok {
			got, err := os.ReadFile(out.Name())
			if err != nil || raw != int64(len(got)) || !bytes.Equal(got, tc.want) {
				t.Errorf("%s: %d bytes said, the file holds %d (%v), want the %d raw ones", tc.name, raw, len(got), err, len(tc.want))
			}
			if reached != tc.size {
				t.Errorf("%s: progress reached %d of %d bytes", tc.name, reached, tc.size)
			}
		}
		out.Close()
	}
}

// A zstd file cut short while it is mapped makes the decompression's
// reads past its new end fault: an error, not a crash.
func TestDecodeIntoFault(t *testing.T) {
	seed := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	f, size := compressedFile(t, t.TempDir(), "zstd-long", seed)
	cut, path := copied(t, f, size, func([]byte) {})
	in, err := mapFile(cut, size)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	if err := os.Truncate(path, int64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	if _, err := decodeInto(dec, in.b, make([]byte, 2*len(seed))); err == nil || !strings.Contains(err.Error(), "faulted") {
		t.Errorf("decompressing a mapped file cut short: %v, want a fault turned into an error", err)
	}
}
