package snapshot

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecode decodes the GPU-made bench seed (26 MB, 330 k trace
// entries) on one goroutine: the VM and the builder together, the cost of
// every byte of a snapshot.
func BenchmarkDecode(b *testing.B) {
	raw := seedRaw(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}

// seedRaw is the bench seed's pickle, decompressed.
func seedRaw(b *testing.B) []byte {
	b.Helper()
	f, err := os.Open("../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkDecodeParts decodes the bench seed in place in 1 to 8 parts,
// cut where balancedCuts says, as ReadFile does a big file: with as
// many cores, ns/op falls with the parts until the walk is what is left.
func BenchmarkDecodeParts(b *testing.B) {
	raw := seedRaw(b)
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("parts=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, _, err := decodeSplit(bytesSource{b: raw}, n, balancedCuts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadFile reads the bench seed from a raw file as the commands
// do (ReadFile): opening, reading and decoding.
func BenchmarkReadFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "seed.pickle")
	raw := seedRaw(b)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = ReadFile(f, int64(len(raw)), 0, nil)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}
