package snapshot

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// compressedFile writes raw compressed with format into dir and opens it:
// gzip, zstd as one block of known size (the frame header says it), or
// zstd-stream, written as a stream (past its first blocks it does not).
func compressedFile(t *testing.T, dir, format string, raw []byte) (*os.File, int64) {
	t.Helper()
	var buf bytes.Buffer
	switch format {
	case "gzip":
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		w.Write(raw)
		w.Close()
	case "zstd":
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
		buf.Write(enc.EncodeAll(raw, nil))
	case "zstd-long": // a window wider than the content, as `zstd --long` writes
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(32<<20), zstd.WithSingleSegment(false))
		buf.Write(enc.EncodeAll(raw, nil))
	case "zstd-stream":
		w, _ := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
		for b := raw; len(b) > 0; b = b[min(len(b), 1<<16):] {
			w.Write(b[:min(len(b), 1<<16)])
		}
		w.Close()
	}
	f, _ := fileOf(t, dir, "in.pickle."+format, buf.Bytes())
	return f, int64(buf.Len())
}

// fileOf is a new file named name in dir that holds b, open until the
// test ends, and its path.
func fileOf(t *testing.T, dir, name string, b []byte) (*os.File, string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

// copied is a copy of the size bytes of f, changed by edit, open, and
// its path.
func copied(t *testing.T, f *os.File, size int64, edit func([]byte)) (*os.File, string) {
	t.Helper()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	edit(b)
	return fileOf(t, t.TempDir(), "copy"+filepath.Ext(f.Name()), b)
}

// flipMiddle damages a stream: its middle byte flipped.
func flipMiddle(b []byte) { b[len(b)/2] ^= 0xff }

// RawSize gives a raw file's size, a gzip stream's from its trailer, a
// zstd stream's from its frame header or, where the header has none, from
// a sample: within 5% for the 26 MB bench seed written as a stream.
func TestRawSize(t *testing.T) {
	small := readRaw(t, "testdata/format/train.pickle")
	seed := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	for _, tc := range []struct {
		name, format string
		raw          []byte
		fcs          bool // the zstd header says the size
		tolerance    float64
	}{
		{"raw", "", small, false, 0},
		{"gzip", "gzip", small, false, 0},
		{"zstd", "zstd", small, true, 0},
		{"zstd stream of the seed", "zstd-stream", seed, false, 0.05},
	} {
		dir := t.TempDir()
		var f *os.File
		var size int64
		switch tc.format {
		case "":
			f, _ = fileOf(t, dir, "raw.pickle", tc.raw)
			size = int64(len(tc.raw))
		default:
			f, size = compressedFile(t, dir, tc.format, tc.raw)
		}
		if tc.format == "zstd" || tc.format == "zstd-stream" {
			head := make([]byte, zstd.HeaderMaxSize)
			n, _ := f.ReadAt(head, 0)
			var h zstd.Header
			if err := h.Decode(head[:n]); err != nil || h.HasFCS != tc.fcs {
				t.Fatalf("%s: the header has a size: %v, want %v (%v)", tc.name, h.HasFCS, tc.fcs, err)
			}
		}
		got, want := RawSize(f, size), int64(len(tc.raw))
		if d := float64(got-want) / float64(want); d > tc.tolerance || d < -tc.tolerance {
			t.Errorf("%s: %d, want %d (within %.0f%%)", tc.name, got, want, 100*tc.tolerance)
		}
	}
}

// ZstdWindow reads a frame's window from the headers the zstd tool (1.5.4)
// wrote for bench files, or the content's size where the frame is one
// segment; nothing for another stream.
func TestZstdWindow(t *testing.T) {
	for _, tc := range []struct {
		name, head string // the file's first bytes, in hex
		want       int64
	}{
		{"--long=27 of 288 MB", "28b52ffd8488540231113497016a48014d51", 128 << 20},
		{"the default level of 288 MB", "28b52ffd8458560d613b4497012a45b94b51", 2 << 20},
		{"--long=27 of 52 MB: one segment", "28b52ffda4a2fe20033497016a48014d5110", 52_493_986},
		{"gzip", "1f8b0800000000000000", 0},
		{"a raw pickle", "80049500000000000000", 0},
		{"a damaged zstd header", "28b52ffd", 0},
	} {
		head, err := hex.DecodeString(tc.head)
		if err != nil {
			t.Fatal(err)
		}
		if got := ZstdWindow(head); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A gzip trailer's size modulo 4 GiB stands for the content nearest the
// sample's estimate, and never for less than the file.
func TestUnwrap(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name              string
		isize, size, near int64
		want              int64
	}{
		{"under 4 GiB", 996e6, 92e6, 991e6, 996e6},
		{"under 4 GiB, sampled high", 996e6, 92e6, 2 * gib, 996e6},
		{"wrapped once", 1 * gib, 500e6, 5 * gib, 5 * gib},
		{"wrapped twice", 1 * gib, 900e6, 9*gib + gib/2, 9 * gib},
		{"no sample: at least the file", 100e6, 500e6, 500e6, 100e6 + 4*gib},
	} {
		if got := unwrap(tc.isize, tc.size, tc.near); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
