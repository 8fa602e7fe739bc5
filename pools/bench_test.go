package pools

import (
	"bytes"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParse times the parse stage on a committed day of logs (24 h
// of SGLang 0.5 at one line every 15 cycles), or on the file
// VRAMSCOPE_BENCH_SERVING_LOG names (bench/RESULTS.md's day of 20 ranks).
func BenchmarkParse(b *testing.B) {
	data := benchLog(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLog(b *testing.B) []byte {
	b.Helper()
	if path := os.Getenv("VRAMSCOPE_BENCH_SERVING_LOG"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	return testutil.Gunzip(b, filepath.Join("../testdata/pools", "sglang05_daily_healthy.log.gz"))
}
