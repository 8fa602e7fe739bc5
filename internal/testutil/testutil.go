// Package testutil holds helpers shared by the tests of several packages.
// Only _test.go files import it.
package testutil

import (
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
