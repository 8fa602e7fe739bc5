package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vramscope/vramscope/internal/pickle"
)

// splitCheck compares split decodes of raw with its sequential decode.
type splitCheck struct {
	raw    []byte
	seq    *Snapshot
	seqErr error
}

func newSplitCheck(raw []byte) *splitCheck {
	seq, err := Decode(bytes.NewReader(raw))
	return &splitCheck{raw: raw, seq: seq, seqErr: err}
}

// decodeBoth decodes raw sequentially and split at cuts (tail k starts at
// the first batch at or after cuts[k-1]), and fails the test unless all
// give the same snapshot or the same error (splitCheck.cuts).
func decodeBoth(t testing.TB, raw []byte, cuts ...int64) int {
	t.Helper()
	return newSplitCheck(raw).cuts(t, cuts...)
}

// cuts decodes raw split at cuts, reading it at offsets and in place, and
// fails the test unless both give the sequential snapshot or error. It
// returns how many tails the split decodes used.
func (c *splitCheck) cuts(t testing.TB, cuts ...int64) int {
	t.Helper()
	used := c.points(t, fmt.Sprint(cuts), len(cuts)+1, func(int64, int) []int64 { return cuts })
	if used[0] != used[1] {
		t.Errorf("split at %v: %d tails used reading at offsets, %d in place", cuts, used[0], used[1])
	}
	return used[0]
}

// points is cuts in n parts with the cuts that cut says, named where for
// messages; it returns how many tails each split decode used.
func (c *splitCheck) points(t testing.TB, where string, n int, cut splitCuts) []int {
	t.Helper()
	raw, seq, seqErr := c.raw, c.seq, c.seqErr
	var released atomic.Int64
	inPlace := bytesSource{b: raw, release: func(from, to int64) {
		if from < 0 || to <= from || to > int64(len(raw)) || from%releaseStep != 0 || to%releaseStep != 0 {
			t.Errorf("split at %s: released %d..%d of %d bytes, want whole steps of %d", where, from, to, len(raw), releaseStep)
		}
		released.Add(to - from)
	}}
	used := make([]int, 2)
	for k, src := range []source{atSource{bytes.NewReader(raw), int64(len(raw))}, inPlace} {
		sp, m, spErr := decodeSplit(src, n, cut)
		used[k] = m
		if seqErr != nil || spErr != nil {
			if seqErr == nil || spErr == nil || seqErr.Error() != spErr.Error() {
				t.Fatalf("split at %s (source %d): error %v, sequential %v", where, k, spErr, seqErr)
			}
			continue
		}
		if !sameSnapshot(seq, sp) {
			t.Fatalf("split at %s (source %d, %d tails used): snapshot differs from the sequential one: %d/%d strings, %d/%d frames, %d/%d stacks, %d/%d events",
				where, k, m, len(sp.strings), len(seq.strings), len(sp.Frames), len(seq.Frames),
				sp.NumStacks(), seq.NumStacks(), sp.events(), seq.events())
		}
	}
	if seqErr == nil && len(raw) > 3*releaseStep && released.Load() == 0 {
		t.Errorf("split at %s: nothing of %d bytes released", where, len(raw))
	}
	return used
}

// A FRAME opcode and lengths that only look so, chained inside a string
// (an annotation's name, past the trace, rewritten as valid UTF-8), fool
// FramesNear into a stretch starting there. The walk of the stretch
// before ends inside that string, so the stretches from the fake one on
// are not joined: the split costs that one tail and decodes the
// sequential snapshot.
func TestSplitAtAFakeFrame(t *testing.T) {
	raw := readRaw(t, "testdata/split/train_per-rep_p5.pickle.gz")
	name := []byte("Optimizer.zero_grad#Adam.zero_grad")
	at := bytes.LastIndex(raw, name)
	if at < 0 {
		t.Fatalf("no annotation %q", name)
	}
	hdr := binary.LittleEndian.AppendUint64([]byte{0xc2, 0x95}, 1) // U+0095, then a length of 1
	fake := append(bytes.Repeat(hdr, 3), 'a')
	copy(raw[at:], fake)
	x := int64(at + 1)
	if _, starts, err := pickle.FramesNear(bytes.NewReader(raw), int64(len(raw)), []int64{x - 1}); err != nil || starts[0] != x {
		t.Fatalf("FramesNear(%d) = %v, %v; want the fake frame at %d", x-1, starts, err, x)
	}
	if used := decodeBoth(t, raw, int64(len(raw)/2), x-1); used != 1 {
		t.Errorf("split at the middle and the fake frame: %d tails used, want 1 (the middle's)", used)
	}
}

// Decoding in two parts gives the sequential snapshot exactly (interning
// order and arena layout included), wherever the tail starts, for every
// real snapshot in the repository; where the split is not possible the
// head decodes alone.
func TestSplitMatchesSequential(t *testing.T) {
	for _, path := range repoSnapshots(t) {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			c := newSplitCheck(readRaw(t, path))
			for _, f := range []float64{0.05, 0.3, 0.55, 0.8, 0.97} {
				c.cuts(t, int64(f*float64(len(c.raw))))
			}
		})
	}
	// Snapshots with more than one batch of trace entries must really be
	// decoded in two parts: the GPU-made bench seed (26 MB, 330 k entries,
	// stacks shared across the split) and grown snapshots in protocols 4
	// and 5. Protocols 2 and 3 have no frames to cut the stream at: the
	// head decodes them alone (torch writes protocol 4 or 5, Python's
	// default since 3.8).
	paths, _ := filepath.Glob("testdata/split/*.pickle.gz")
	paths = append(paths, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	for _, path := range paths {
		c := newSplitCheck(readRaw(t, path))
		for _, f := range []float64{0.3, 0.55, 0.8} {
			if got, want := c.cuts(t, int64(f*float64(len(c.raw)))), tailsFor(c.raw, 1); got != want {
				t.Errorf("%s split at %.2f: %d tails used, want %d", path, f, got, want)
			}
		}
		// As ReadAt splits (on a small file the cuts may be past the
		// trace: nothing to split then).
		for n := 2; n <= 4; n++ {
			c.points(t, "the balanced cuts", n, balancedCuts)
		}
	}
	if len(paths) < 5 {
		t.Errorf("found %d multi-batch snapshots, want 5", len(paths))
	}
}

// Decoding in n parts, n = 1..8, gives the sequential snapshot exactly,
// whatever the cuts: spread evenly but off any round offset, all at one
// offset (the tails then start at successive batches), or bunched at the
// end. The snapshots with many batches of trace entries use every tail
// when the cuts are spread over their trace, which ends with the last
// batch, some 30 kB before the end of the file: over the first 85%.
func TestSplitInNParts(t *testing.T) {
	cutsFor := map[string]func(size int64, n int) []int64{
		"spread": func(size int64, n int) (c []int64) {
			for k := 1; k < n; k++ {
				c = append(c, size*int64(k)/int64(n)+int64(k*k*37))
			}
			return c
		},
		"one offset": func(size int64, n int) []int64 { return slices.Repeat([]int64{size / 3}, n-1) },
		"bunched": func(size int64, n int) (c []int64) {
			for k := 1; k < n; k++ {
				c = append(c, size-size/int64(4*k+1))
			}
			return c
		},
	}
	for _, path := range repoSnapshots(t) {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			c := newSplitCheck(readRaw(t, path))
			for n := 1; n <= 8; n++ {
				c.cuts(t, cutsFor["spread"](int64(len(c.raw)), n)...)
			}
			for _, n := range []int{3, 8} {
				c.cuts(t, cutsFor["one offset"](int64(len(c.raw)), n)...)
				c.cuts(t, cutsFor["bunched"](int64(len(c.raw)), n)...)
			}
		})
	}
	paths, _ := filepath.Glob("testdata/split/*.pickle.gz")
	paths = append(paths, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	for _, path := range paths {
		c := newSplitCheck(readRaw(t, path))
		for n := 2; n <= 8; n++ {
			if used, want := c.cuts(t, cutsFor["spread"](int64(len(c.raw))*85/100, n)...), tailsFor(c.raw, n-1); used != want {
				t.Errorf("%s in %d parts: %d tails used, want %d", path, n, used, want)
			}
		}
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
			if decodeBoth(t, tc.edit(bytes.Clone(raw)), from) > 0 {
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
// arbitrary bytes: same snapshot or same error, never a panic. Up to 7
// tails start every step bytes from from on.
func FuzzSplit(f *testing.F) {
	for _, path := range []string{"testdata/format/train.pickle", "../testdata/scenarios/out/leak_closure/step3/server_rank0_pid561.pickle.gz"} {
		raw := readRaw(f, path)
		f.Add(raw, uint32(len(raw)/2), uint32(0), uint8(1))
		f.Add(raw, uint32(len(raw)/5), uint32(len(raw)/5), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, from, step uint32, tails uint8) {
		cuts := make([]int64, tails%8)
		for k := range cuts {
			cuts[k] = int64(from) + int64(k)*int64(step)
		}
		decodeBoth(t, data, cuts...)
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
		if !sameSnapshot(got, want) {
			t.Errorf("%s: ReadAt and Read differ", path)
		}
	}
	if _, err := ReadAt(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), 4); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("a broken gzip header gave %v, want Read's gzip error", err)
	}
}

// tailsFor is how many tails a split of raw in n+1 parts uses where each
// stretch holds a batch of trace entries: n for a framed stream (protocol
// 4 and later), none for one without frames.
func tailsFor(raw []byte, n int) int {
	if len(raw) > 1 && raw[0] == 0x80 && raw[1] >= 4 {
		return n
	}
	return 0
}

// The head's part is larger than the tails' by the count's cost, since
// the tails start once the walkers are done: in 4 parts 1.28/4.28 of the
// file and then 1/4.28 each; in 2 parts 1.28/2.28.
func TestBalancedCuts(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int64
	}{
		{2, []int64{561}},
		{4, []int64{299, 532, 766}},
	} {
		if got := balancedCuts(1000, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%d parts: cuts %v, want %v", tc.n, got, tc.want)
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
		got, err := ReadFile(f, st.Size(), 0, func(off int64) {
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
		if !sameSnapshot(got, want) {
			t.Errorf("%s: ReadFile and Read differ", path)
		}
		if reached != st.Size() {
			t.Errorf("%s: progress reached %d of %d bytes", path, reached, st.Size())
		}
	}

}

// A tail walks again at most maxReread bytes: an entry of a counted
// stretch whose marks lie further apart (a stream with one frame) is not
// read, and neither is one before the counted stretches.
func TestTailReadsBounded(t *testing.T) {
	r := &tailReads{counted: []pickle.Counted{{First: 10, Marks: []pickle.Mark{{Off: 100}, {Off: 100 + maxReread + 1, N: 5}}}}}
	for _, id := range []uint64{5, 12} {
		if v, ok := r.read(id); ok {
			t.Errorf("entry %d read as %v", id, v)
		}
	}
}

// TestMapSlots: mapParts decoders of the process may read through
// mappings at once, and the slots come back when their decodes end.
func TestMapSlots(t *testing.T) {
	first, ok := mapSlots(mapParts - 1)
	if !ok {
		t.Fatalf("%d slots refused with none taken", mapParts-1)
	}
	last, ok := mapSlots(1)
	if !ok {
		t.Fatal("the last slot refused")
	}
	if _, ok := mapSlots(1); ok {
		t.Errorf("a slot past %d given", mapParts)
	}
	first()
	if _, ok := mapSlots(mapParts); ok {
		t.Errorf("%d slots given with one taken", mapParts)
	}
	again, ok := mapSlots(mapParts - 1)
	if !ok {
		t.Errorf("%d slots refused once given back", mapParts-1)
	}
	again()
	last()
	if n := mappedDecoders.Load(); n != 0 {
		t.Errorf("%d slots held after all were given back", n)
	}
}
