package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// decodeBoth decodes raw sequentially and split at from, reading it at
// offsets and in place, and fails the test unless all give the same
// snapshot or the same error. It reports whether the split decodes used
// their tails.
func decodeBoth(t testing.TB, raw []byte, from int64) bool {
	t.Helper()
	merged := decodeBothAt(t, raw, fmt.Sprint(from), func(_, _, _ int64) int64 { return from })
	if merged[0] != merged[1] {
		t.Errorf("split at %d: tail used %v reading at offsets, %v in place", from, merged[0], merged[1])
	}
	return merged[0]
}

// decodeBothAt is decodeBoth with the split point that point says, named
// where for messages; it reports whether each split decode used its tail.
func decodeBothAt(t testing.TB, raw []byte, where string, point func(size, head, walked int64) int64) []bool {
	t.Helper()
	seq, seqErr := Decode(bytes.NewReader(raw))
	if seq != nil {
		seq.in.key = nil // interning scratch
	}
	var released atomic.Int64
	inPlace := bytesSource{b: raw, release: func(from, to int64) {
		if from < 0 || to <= from || to > int64(len(raw)) || from%releaseStep != 0 || to%releaseStep != 0 {
			t.Errorf("split at %s: released %d..%d of %d bytes, want whole steps of %d", where, from, to, len(raw), releaseStep)
		}
		released.Add(to - from)
	}}
	merged := make([]bool, 2)
	for k, src := range []source{atSource{bytes.NewReader(raw), int64(len(raw))}, inPlace} {
		sp, m, spErr := decodeSplit(src, point)
		merged[k] = m
		if seqErr != nil || spErr != nil {
			if seqErr == nil || spErr == nil || seqErr.Error() != spErr.Error() {
				t.Fatalf("split at %s (source %d): error %v, sequential %v", where, k, spErr, seqErr)
			}
			continue
		}
		sp.in.key = nil
		if !reflect.DeepEqual(seq, sp) {
			t.Fatalf("split at %s (source %d, tail used: %v): snapshot differs from the sequential one: %d/%d strings, %d/%d frames, %d/%d stacks, %d/%d events",
				where, k, m, len(sp.strings), len(seq.strings), len(sp.Frames), len(seq.Frames),
				sp.NumStacks(), seq.NumStacks(), sp.events(), seq.events())
		}
	}
	if seqErr == nil && len(raw) > 3*releaseStep && released.Load() == 0 {
		t.Errorf("split at %s: nothing of %d bytes released", where, len(raw))
	}
	return merged
}

// Decoding in two parts gives the sequential snapshot exactly (interning
// order and arena layout included), wherever the tail starts, for every
// real snapshot in the repository; where the split is not possible the
// head decodes alone.
func TestSplitMatchesSequential(t *testing.T) {
	for _, path := range repoSnapshots(t) {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			raw := readRaw(t, path)
			for _, f := range []float64{0.05, 0.3, 0.55, 0.8, 0.97} {
				decodeBoth(t, raw, int64(f*float64(len(raw))))
			}
		})
	}
	// Snapshots with more than one batch of trace entries must really be
	// decoded in two parts: the GPU-made bench seed (26 MB, 330 k entries,
	// stacks shared across the split) and grown snapshots in protocols 2-5.
	paths, _ := filepath.Glob("testdata/split/*.pickle.gz")
	paths = append(paths, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	for _, path := range paths {
		raw := readRaw(t, path)
		for _, f := range []float64{0.3, 0.55, 0.8} {
			if !decodeBoth(t, raw, int64(f*float64(len(raw)))) {
				t.Errorf("%s split at %.2f: the tail was not used", path, f)
			}
		}
		// As ReadAt splits: where the two goroutines' pace says (on a
		// small file that may be past the trace: nothing to split then).
		decodeBothAt(t, raw, "the balanced point", balancedSplit)
	}
	if len(paths) < 5 {
		t.Errorf("found %d multi-batch snapshots, want 5", len(paths))
	}
}

// A damaged file fails with the sequential decoder's error, whether the
// damage lies before the split, inside the tail, or at its end.
func TestSplitFailsLikeSequential(t *testing.T) {
	raw := readRaw(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	from := int64(len(raw) / 2)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"truncated in the tail", func(b []byte) []byte { return b[:len(b)*4/5] }},
		{"truncated before the split", func(b []byte) []byte { return b[:len(b)/3] }},
		{"refused opcode in the tail", func(b []byte) []byte { return corruptOpcode(b, len(b)*3/4) }},
		{"refused opcode in the head", func(b []byte) []byte { return corruptOpcode(b, len(b)/4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if decodeBoth(t, tc.edit(bytes.Clone(raw)), from) {
				t.Error("a damaged tail was merged")
			}
		})
	}
}

// corruptOpcode puts a GLOBAL opcode (refused) over the first MARK at or
// after offset at.
func corruptOpcode(b []byte, at int) []byte {
	i := at + bytes.Index(b[at:], []byte{'e', '('}) + 1 // an APPENDS, then the next batch's MARK
	b[i] = 'c'
	return b
}

// FuzzSplit checks the split decoder against the sequential one on
// arbitrary bytes: same snapshot or same error, never a panic.
func FuzzSplit(f *testing.F) {
	for _, path := range []string{"testdata/format/train.pickle", "../testdata/scenarios/out/leak_closure/step3/server_rank0_pid561.pickle.gz"} {
		raw := readRaw(f, path)
		f.Add(raw, uint32(len(raw)/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, from uint32) {
		decodeBoth(t, data, int64(from))
	})
}

// ReadAt reads what Read reads: compressed files and small raw ones through
// Read itself.
func TestReadAtMatchesRead(t *testing.T) {
	for _, path := range []string{"testdata/format/train.pickle", "../testdata/scenarios/out/leak_closure/step3/server_rank0_pid561.pickle.gz"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Read(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadAt(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want.in.key, got.in.key = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ReadAt and Read differ", path)
		}
	}
	if _, err := ReadAt(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), 4); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("a broken gzip header gave %v, want Read's gzip error", err)
	}
}

// The split point ends head and tail together: half the file when the
// walk is infinitely faster than decoding, later the slower the walk, at
// most 1/1.1 of the file however slow it seems.
func TestBalancedSplit(t *testing.T) {
	for _, tc := range []struct {
		head, walked, want int64
	}{
		{0, 0, 500},
		{0, 400, 500},
		{450, 1000, 645},  // h/w = 0.45: 1000/1.55
		{300, 1000, 588},  // h/w = 0.3: 1000/1.7
		{2000, 1000, 909}, // clamped to h/w = 0.9
	} {
		if got := balancedSplit(1000, tc.head, tc.walked); got != tc.want {
			t.Errorf("head %d, walked %d: split at %d, want %d", tc.head, tc.walked, got, tc.want)
		}
	}
}

// ReadFile reads what Read reads: small and compressed files through
// ReadAt, with progress up to their end (mmap_linux_test.go tests a mapped
// one).
func TestReadFile(t *testing.T) {
	for _, path := range []string{"testdata/format/train.pickle", "../testdata/scenarios/out/leak_closure/step3/server_rank0_pid561.pickle.gz"} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		var mu sync.Mutex
		reached := int64(0)
		got, err := ReadFile(f, st.Size(), func(off int64) {
			mu.Lock()
			reached = max(reached, off)
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want, err := Read(bytes.NewReader(readRaw(t, path)))
		if err != nil {
			t.Fatal(err)
		}
		want.in.key, got.in.key = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ReadFile and Read differ", path)
		}
		if reached != st.Size() {
			t.Errorf("%s: progress reached %d of %d bytes", path, reached, st.Size())
		}
	}

}
