package inputs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
)

// content is the bytes of a fake snapshot, n of them, each telling its
// offset apart from its neighbours'.
func content(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 / 5)
	}
	return b
}

// readAll reads s from its start through a Reader, as Open would.
func readAll(t *testing.T, s stdinSource) []byte {
	t.Helper()
	r, err := s.reader()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.BytesRead() != int64(len(b)) {
		t.Errorf("BytesRead %d, read %d", r.BytesRead(), len(b))
	}
	return b
}

func TestOpenStdin(t *testing.T) {
	want := content(3*spoolChunk + 12345) // several chunks, the last one short
	redirect := filepath.Join(t.TempDir(), "snap.pickle")
	if err := os.WriteFile(redirect, want, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) *os.File {
		f, err := os.Open(redirect)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, tc := range []struct {
		name   string
		stdin  func(t *testing.T) *os.File
		cores  int
		want   []byte
		inFile bool // read through a file (of size len(want)), not as a stream
		copied bool // into a temporary file
	}{
		{"a redirect is read in place", open, 1, want, true, false},
		{"a pipe is copied", func(t *testing.T) *os.File { return testutil.Pipe(t, want) }, 2, want, true, true},
		{"an empty pipe too", func(t *testing.T) *os.File { return testutil.Pipe(t, nil) }, 2, []byte{}, true, true},
		{"a pipe on one core is a stream", func(t *testing.T) *os.File { return testutil.Pipe(t, want) }, 1, want, false, false},
		{"a redirect partly read is copied from there", func(t *testing.T) *os.File {
			f := open(t)
			if _, err := f.Seek(100, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			return f
		}, 2, want[100:], true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var progress []int64
			f := tc.stdin(t)
			s := openStdin(f, tc.cores, dir, 1<<40, func(n int64) { progress = append(progress, n) })
			if s.err != nil {
				t.Fatal(s.err)
			}
			if got := s.file != nil; got != tc.inFile {
				t.Fatalf("read through a file: %v, want %v", got, tc.inFile)
			}
			if tc.inFile && s.size != int64(len(tc.want)) {
				t.Errorf("size %d, want %d", s.size, len(tc.want))
			}
			if got := s.file != nil && s.file != f; got != tc.copied {
				t.Errorf("copied: %v, want %v", got, tc.copied)
			}
			if tc.copied && len(tc.want) > 0 && (len(progress) == 0 || progress[len(progress)-1] != int64(len(tc.want))) {
				t.Errorf("progress told %v, want it to end at %d", progress, len(tc.want))
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
				t.Errorf("left in the directory: %v", left)
			}
			// A file is read from its start each time; a stream once.
			for range 1 + btoi(tc.inFile) {
				if got := readAll(t, s); !bytes.Equal(got, tc.want) {
					t.Fatalf("read %d bytes, not the %d written", len(got), len(tc.want))
				}
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A pipe that holds more than the directory has room for, or that cannot
// be copied at all, is a stream of every byte it held.
func TestSpoolWithoutRoom(t *testing.T) {
	want := content(5*spoolChunk + 1)
	for _, tc := range []struct {
		name string
		dir  string
		room int64
	}{
		{"room for two chunks", t.TempDir(), 2*spoolChunk + 10},
		{"room for none", t.TempDir(), 0},
		{"no directory", filepath.Join(t.TempDir(), "missing"), 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spool(testutil.Pipe(t, want), tc.dir, tc.room, nil)
			if s.err != nil || s.file != nil || s.size != -1 {
				t.Fatalf("got file %v, size %d, err %v; want a stream", s.file, s.size, s.err)
			}
			if got := readAll(t, s); !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
			}
		})
	}
}

// failing reads n bytes, then fails.
type failing struct{ n int }

func (f *failing) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("connection reset")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

// A pipe that breaks is an error that says where, not a short file.
func TestSpoolReadError(t *testing.T) {
	s := spool(&failing{n: spoolChunk + 5}, t.TempDir(), 1<<40, nil)
	if s.err == nil || s.file != nil {
		t.Fatalf("got file %v, err %v; want an error", s.file, s.err)
	}
	if msg := s.err.Error(); !strings.Contains(msg, "reading standard input (after 1048581 bytes): connection reset") {
		t.Errorf("error %q", msg)
	}
	if _, err := s.reader(); err != s.err {
		t.Errorf("reader: %v, want the spool's error", err)
	}
}

// Open reads os.Stdin as it is: a test's own file, anew when that changes.
func TestOpenStdinInput(t *testing.T) {
	saved := os.Stdin
	defer func() { os.Stdin = saved }()
	for _, want := range [][]byte{content(1000), content(2000)} {
		os.Stdin = testutil.Pipe(t, want)
		r, err := Input{Path: Stdin}.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(want))
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}
}
