package replay

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// writeSeries writes values the way run does, in batches of batch values
// (write): the batches' ends fall inside blocks and on their ends.
func writeSeries(shift uint8, values []int64, batch int) series {
	s := newSeries(len(values), shift)
	for start := 0; start < len(values); start += batch {
		s.write(start, values[start:min(start+batch, len(values))])
	}
	return s
}

// steps returns n values, from first on, that go up by step at each event.
func steps(n int, first, step int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)*step
	}
	return out
}

// with returns values with values[i] = v.
func with(values []int64, i int, v int64) []int64 {
	values = slices.Clone(values)
	values[i] = v
	return values
}

// TestSeries writes series and reads every value back, and the largest of
// every range: blocks of offsets that fit in 16 bits, blocks that keep high
// halves, partial last blocks, and values that do not fit, which move the
// whole series, earlier values (sealed or staged) included, to int64s.
func TestSeries(t *testing.T) {
	const unit = 1 << allocator.MinBlockBits
	tests := []struct {
		name   string
		shift  uint8
		values []int64
		// highs is the number of blocks with high halves; -1: the series
		// ends wide.
		highs int
	}{
		{"no events", allocator.MinBlockBits, nil, 0},
		{"1 event", allocator.MinBlockBits, []int64{7 * unit}, 0},
		{"31 events", allocator.MinBlockBits, steps(31, 1<<40, -1000*unit), 0},
		{"32 events", allocator.MinBlockBits, steps(32, 0, 2000*unit), 0},
		{"33 events", allocator.MinBlockBits, steps(33, 5*unit, 2000*unit), 0},
		{"falling over 3 blocks", allocator.MinBlockBits, steps(96, 1<<30, -3*unit), 0},
		{"a peak inside a block", allocator.MinBlockBits, with(steps(64, 1<<30, 0), 40, 1<<30+9*unit), 0},
		{"block sizes", allocator.MinBlockBits, []int64{0, 512, 3 * 512, 1 << 40, (1<<32 - 1) << allocator.MinBlockBits, 0}, 1},
		{"range of 2^16-1 units", allocator.MinBlockBits, []int64{10 * unit, (10 + 1<<16 - 1) * unit, 10 * unit}, 0},
		{"range of 2^16 units", allocator.MinBlockBits, []int64{10 * unit, (10 + 1<<16) * unit, 10 * unit}, 1},
		{"second block of three does not fit", allocator.MinBlockBits, with(steps(96, 1<<30, unit), 40, 1<<40), 1},
		{"whole blocks do not fit, the last 4 events do", allocator.MinBlockBits, steps(100, 0, 3000*unit), 3},
		{"range of 2^32-1 in one block", 0, []int64{1<<32 - 1, 0, 1<<31 + 5}, 1},
		{"not a multiple of 512", allocator.MinBlockBits, []int64{512, 1024, 1536 + 1, 2048, 512}, -1},
		{"2^32 units", allocator.MinBlockBits, []int64{512, 1 << 41, 512}, -1},
		{"negative", allocator.MinBlockBits, []int64{512, -512, 0}, -1},
		{"wide at the first event", allocator.MinBlockBits, with(steps(40, 0, unit), 0, 1), -1},
		{"wide in the middle of the second block", allocator.MinBlockBits, with(steps(70, 0, 3000*unit), 45, -unit), -1},
		{"wide at a block boundary", allocator.MinBlockBits, with(steps(70, 0, 3000*unit), 32, 1<<45), -1},
		{"wide at the last event", allocator.MinBlockBits, with(steps(33, 0, unit), 32, unit+1), -1},
		{"requested gaps", 0, []int64{0, 1, 511, 1<<32 - 1, 7}, 1},
		{"negative requested gap", 0, []int64{3, -1, 7}, -1},
		{"requested gap of 2^32", 0, []int64{3, 1 << 32, 7}, -1},
	}
	for _, tt := range tests {
		for _, batch := range []int{1, 7, blockLen, 45, max(len(tt.values), 1)} {
			t.Run(fmt.Sprintf("%s/batches of %d", tt.name, batch), func(t *testing.T) {
				testSeries(t, writeSeries(tt.shift, tt.values, batch), tt.values, tt.highs)
			})
		}
	}
}

// testSeries checks s, written from values: every value read back, the
// largest of every range (whole blocks, parts of blocks, blocks with high
// halves, wide series), and highs blocks with high halves (-1: wide).
func testSeries(t *testing.T, s series, values []int64, highs int) {
	t.Helper()
	if s.len() != len(values) {
		t.Fatalf("len %d, want %d", s.len(), len(values))
	}
	for i, v := range values {
		if got := s.at(i); got != v {
			t.Errorf("at(%d) = %d, want %d", i, got, v)
		}
	}
	for lo := range values {
		for hi := lo + 1; hi <= len(values); hi++ {
			if got, want := s.maxIn(lo, hi), slices.Max(values[lo:hi]); got != want {
				t.Fatalf("maxIn(%d, %d) = %d, want %d", lo, hi, got, want)
			}
		}
	}
	got := -1
	if s.wide == nil {
		got = int(s.highs) - 1
	}
	if got != highs {
		t.Errorf("%d blocks with high halves (-1: wide), want %d", got, highs)
	}
}

// TestTimelineOddSizes replays a block whose size, from the final snapshot,
// is not a multiple of 512 (only a damaged or synthetic snapshot has one):
// the series go wide and every sample stays exact.
func TestTimelineOddSizes(t *testing.T) {
	sn := build(
		[]seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{
			{1000, 900, allocated}, {2*mib - 1000, 0, inactive},
		}}},
		events(ev(snap, 0, 0), ev(alloc, a0+1024, 4096), free(a0+1024, 4096)),
	)
	tl, err := Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	reserved := int64(2 * mib)
	want := []Sample{
		{Allocated: 1000, Requested: 900, Active: 1000, Reserved: reserved},
		{Allocated: 1000 + 4096, Requested: 900 + 4096, Active: 1000 + 4096, Reserved: reserved},
		{Allocated: 1000, Requested: 900, Active: 1000 + 4096, Reserved: reserved},
		{Allocated: 1000, Requested: 900, Active: 1000, Reserved: reserved},
	}
	if tl.Len() != len(want) {
		t.Fatalf("%d events, want %d", tl.Len(), len(want))
	}
	for i, w := range want {
		if got := tl.At(i); got != w {
			t.Errorf("At(%d) = %+v, want %+v", i, got, w)
		}
		if got := tl.Value(Requested, i); got != w.Requested {
			t.Errorf("Value(Requested, %d) = %d, want %d", i, got, w.Requested)
		}
	}
	if tl.allocated.wide == nil || tl.active.wide == nil {
		t.Error("allocated and active stayed narrow with a 1000-byte block")
	}
}

// TestTimelineLargeRequests frees blocks whose requested sizes do not fit
// a free's word (2^31 - 1 bytes and up) beside one that does: the
// accountant reads those from their alloc events, and every sample is
// exact.
func TestTimelineLargeRequests(t *testing.T) {
	const gib = 1 << 30
	big, edge := uint64(3*gib+512), uint64(requestedUnknown)
	sn := build(
		[]seg{
			{addr: a0, size: 4 * gib, typ: snapshot.Large, blocks: []blk{{4 * gib, 0, inactive}}},
			{addr: b0, size: 2 * gib, typ: snapshot.Large, blocks: []blk{{2 * gib, 0, inactive}}},
			{addr: e0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{{2 * mib, 0, inactive}}},
		},
		events(ev(alloc, a0, big), ev(alloc, b0, edge), ev(alloc, e0, 1000),
			free(b0, edge), free(a0, big), free(e0, 1000)),
	)
	tl, err := Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	size := func(r uint64) int64 { return int64((r + 511) &^ 511) }
	want := []int64{int64(big), int64(big + edge), int64(big + edge + 1000),
		int64(big + 1000), int64(big + 1000), 1000, 1000, 0, 0}
	wantAllocated := []int64{size(big), size(big) + size(edge), size(big) + size(edge) + 1024,
		size(big) + 1024, size(big) + 1024, 1024, 1024, 0, 0}
	for i := range want {
		if got := tl.Value(Requested, i); got != want[i] {
			t.Errorf("Value(Requested, %d) = %d, want %d", i, got, want[i])
		}
		if got := tl.Value(Allocated, i); got != wantAllocated[i] {
			t.Errorf("Value(Allocated, %d) = %d, want %d", i, got, wantAllocated[i])
		}
	}
	if c := tl.Caveats; len(c) != 0 {
		t.Errorf("caveats %+v, want none", c)
	}
}

// TestPeakIn checks PeakIn, which skips stretches on their blocks' largest
// offsets, against every value read in turn, for the allocated and active
// bytes of every format fixture and the GPU-made bench seed, over the
// whole trace and over ranges of every length up to three stretches at
// offsets on and off a stretch's start.
func TestPeakIn(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle"))
	paths = append(paths, filepath.Join("..", "testdata", "scenarios", "out", "bench_source", "bench_source.pickle.gz"))
	long := 0
	for _, path := range paths {
		tls, err := Devices(testutil.Snapshot(t, path))
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tls {
			n := tl.Len()
			if n == 0 {
				continue
			}
			if n > 4*StretchLen {
				long++
			}
			ranges := [][2]int{{0, n}}
			for _, lo := range []int{0, 1, StretchLen - 1, StretchLen, n / 2} {
				for l := 1; l <= 3*StretchLen && lo+l <= n; l += 7 {
					ranges = append(ranges, [2]int{lo, lo + l})
				}
			}
			for _, m := range []Metric{Allocated, Active} {
				for _, r := range ranges {
					best, top := r[0], tl.Value(m, r[0])
					for i := r[0] + 1; i < r[1]; i++ {
						if v := tl.Value(m, i); v > top {
							best, top = i, v
						}
					}
					if i, v := tl.PeakIn(m, r[0], r[1]); i != best || v != top {
						t.Fatalf("%s device %d, %v events %d..%d: PeakIn = %d, %d; want %d, %d", filepath.Base(path), tl.Device, m, r[0], r[1], i, v, best, top)
					}
				}
			}
		}
	}
	if long == 0 {
		t.Error("no trace of four stretches or more")
	}
}

// BenchmarkSeriesWrite writes a series of a million values the way the
// replay's writers do, in batches of 8192: a walk of block sizes around
// 40 GiB, as allocated bytes move.
func BenchmarkSeriesWrite(b *testing.B) {
	values := make([]int64, 1<<20)
	v := int64(40 << 30)
	for i := range values {
		v += int64(i*7919%4001-2000) << allocator.MinBlockBits
		values[i] = v
	}
	for b.Loop() {
		writeSeries(allocator.MinBlockBits, values, 8192)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(values)), "ns/value")
}

// TestSeriesHighChunks writes a series whose every block keeps high halves,
// over more blocks than a chunk of them holds, and reads every value back.
func TestSeriesHighChunks(t *testing.T) {
	const unit = 1 << allocator.MinBlockBits
	values := make([]int64, (2*highChunkLen+5)*blockLen+7)
	for i := range values {
		values[i] = int64(i%3) << 17 * unit
	}
	for _, batch := range []int{blockLen, 8192} {
		s := writeSeries(allocator.MinBlockBits, values, batch)
		if got, want := int(s.highs)-1, len(values)/blockLen+1; got != want {
			t.Errorf("batches of %d: %d blocks with high halves, want %d", batch, got, want)
		}
		for i, v := range values {
			if got := s.at(i); got != v {
				t.Fatalf("batches of %d: at(%d) = %d, want %d", batch, i, got, v)
			}
		}
		if got, want := s.maxIn(3, len(values)-2), int64(2)<<17*unit; got != want {
			t.Errorf("batches of %d: maxIn = %d, want %d", batch, got, want)
		}
		if len(s.high) != 3 || cap(s.high[0]) != highChunkLen<<blockBits {
			t.Errorf("batches of %d: %d chunks, the first of %d halves", batch, len(s.high), cap(s.high[0]))
		}
	}
}
