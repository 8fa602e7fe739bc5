package snapshot

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A compressed file goes by way of a temporary file where its content is
// big enough for the parts that pay, 8 for gzip and 4 for zstd, or its
// zstd window passes a sixth of it.
func TestTempPays(t *testing.T) {
	gz, zst, raw := gzipMagic, zstdMagic, []byte{0x80, 4, 0x95, 0}
	const gb, mb = 1 << 30, 1 << 20
	for _, tc := range []struct {
		name   string
		magic  []byte
		est    int64
		window int64
		cores  int
		want   bool
	}{
		{"gzip, 16 cores", gz, gb, 0, 16, true},
		{"gzip, 8 cores", gz, gb, 0, 8, true},
		{"gzip, 4 cores", gz, gb, 0, 4, false},
		{"zstd, 4 cores", zst, gb, 2 * mb, 4, true},
		{"zstd, 2 cores", zst, gb, 2 * mb, 2, false},
		{"zstd --long=27 of 600 MB, 2 cores", zst, 600 * mb, 128 * mb, 2, true},
		{"zstd --long=27 of 300 MB, 1 core", zst, 300 * mb, 128 * mb, 1, true},
		{"zstd --long=27 of 1 GB, 2 cores", zst, gb, 128 * mb, 2, false},
		{"a window of a sixth", zst, 6 * 128 * mb, 128 * mb, 2, false},
		{"a wide window, a small file", zst, splitMin - 1, 128 * mb, 2, false},
		{"gzip of 100 MB: 6 parts", gz, 100 << 20, 0, 16, false},
		{"zstd of 100 MB: 6 parts", zst, 100 << 20, 2 * mb, 16, true},
		{"below the split's minimum", zst, splitMin - 1, 2 * mb, 16, false},
		{"a raw pickle", raw, gb, 0, 16, false},
		{"any size, 16 cores", zst, math.MaxInt64, 0, 16, true},
		{"any size, 2 cores", gz, math.MaxInt64, 0, 2, false},
	} {
		if got := tempPays(tc.magic, tc.est, tc.window, tc.cores); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The bench seed, gzipped or zstd-compressed (with a window wider than
// itself too, which goes through mappings), decompresses into an
// unlinked temporary file holding its raw bytes, which decodes to what
// the stream does; progress counts the compressed bytes.
func TestDecompressTemp(t *testing.T) {
	raw := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	want, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"gzip", "zstd", "zstd-long"} {
		t.Run(format, func(t *testing.T) {
			f, size := compressedFile(t, t.TempDir(), format, raw)
			tmp := t.TempDir()
			var mu sync.Mutex
			reached := int64(0)
			tf, n, ok := decompressTemp(f, size, streamHead(f), RawSize(f, size), tmp, func(off int64) {
				mu.Lock()
				reached = max(reached, off)
				mu.Unlock()
			})
			if !ok {
				t.Fatal("not decompressed")
			}
			defer tf.Close()
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("%d files left in the directory, want the file unlinked", len(left))
			}
			got := make([]byte, n)
			if _, err := tf.ReadAt(got, 0); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("the file holds %d bytes (%v), not the %d raw ones", n, err, len(raw))
			}
			if reached != size {
				t.Errorf("progress reached %d of %d bytes", reached, size)
			}
			sn, err := readFile(tf, n, 4, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if !sameSnapshot(sn, want) {
				t.Error("the temporary file decodes to another snapshot than the stream")
			}
		})
	}
}

// A stream that is damaged, holds more than twice its estimate or cannot
// be written is left to the stream decoder, and leaves no file behind.
func TestDecompressTempRefuses(t *testing.T) {
	raw := readRaw(t, "testdata/format/train.pickle")
	f, size := compressedFile(t, t.TempDir(), "gzip", raw)
	damaged, _ := copied(t, f, size, flipMiddle)
	for _, tc := range []struct {
		name string
		f    *os.File
		est  int64
		dir  string
	}{
		{"damaged", damaged, int64(len(raw)), t.TempDir()},
		{"over twice the estimate", f, int64(len(raw)) / 3, t.TempDir()},
		{"no directory", f, int64(len(raw)), filepath.Join(t.TempDir(), "missing")},
	} {
		if tf, _, ok := decompressTemp(tc.f, size, streamHead(tc.f), tc.est, tc.dir, nil); ok {
			tf.Close()
			t.Errorf("%s: decompressed", tc.name)
		}
		if left, _ := os.ReadDir(tc.dir); len(left) != 0 {
			t.Errorf("%s: %d files left behind", tc.name, len(left))
		}
	}
}
