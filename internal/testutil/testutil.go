// Package testutil holds helpers shared by the tests of several packages.
// Only _test.go files import it.
package testutil

import (
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

// Snapshot reads and decodes the snapshot at path (raw, gzip or zstd),
// failing the test on any error.
func Snapshot(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sn, err := snapshot.Read(f)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return sn
}

// Gunzip returns the content of the gzip file at path, failing tb on any
// error: a test's compressed fixture, such as a serving log.
func Gunzip(tb testing.TB, path string) []byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return b
}
