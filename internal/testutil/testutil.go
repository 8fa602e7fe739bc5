// Package testutil holds helpers shared by the tests of several packages.
// Only _test.go files import it.
package testutil

import (
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Fixtures lists the real snapshots of a package's tests, from a package
// directory one below the repository's root: the format fixtures and every
// scenario's, 40 and more.
func Fixtures(tb testing.TB) []string {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle*"))
	filepath.WalkDir(filepath.Join("..", "testdata", "scenarios", "out"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pickle.gz") {
			files = append(files, path)
		}
		return err
	})
	if len(files) < 40 {
		tb.Fatalf("found %d fixtures, want the 40+ in the repository", len(files))
	}
	return files
}

// FormatSeeds adds the decoder's format fixtures to f's corpus, read raw,
// from a package directory one below the repository's root: the seeds of
// the fuzz targets that feed what the decoder makes of arbitrary bytes to
// the stages after it.
func FormatSeeds(f *testing.F) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle"))
	if len(files) == 0 {
		f.Fatal("no format fixtures under ../snapshot/testdata/format")
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
}

// Pipe is the read end of a pipe that is fed b and then closed, as
// standard input is when a file is piped to a command; tb closes it at
// its end.
func Pipe(tb testing.TB, b []byte) *os.File {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		w.Write(b)
		w.Close()
	}()
	tb.Cleanup(func() { r.Close() })
	return r
}

// Python is python3's path, for the tests that run the capture hook under
// plain python3 with the stand-in torch of capture/hook/testdata. Where
// python3 is missing the test is skipped: .ci/run installs it (.ci/need)
// before it runs go test, and scripts/gpu-e2e.sh runs the hook under real
// torch on the GPU.
func Python(tb testing.TB) string {
	tb.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		tb.Skip("python3 is not installed: .ci/run installs it and runs this test, and scripts/gpu-e2e.sh runs the hook under real torch on the GPU")
	}
	return python
}
