package snapshot

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// BenchmarkDecode decodes the GPU-made bench seed (26 MB, 330 k trace
// entries) on one goroutine: the VM and the builder together, the cost of
// every byte of a snapshot.
func BenchmarkDecode(b *testing.B) {
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
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}
