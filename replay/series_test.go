package replay

import (
	"github.com/vramscope/vramscope/allocator"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

// TestSeries stores values the way run does (put, then set where put
// refuses) and reads every one back: a value that does not fit moves the
// whole series, earlier values included, to int64s.
func TestSeries(t *testing.T) {
	tests := []struct {
		name   string
		shift  uint8
		values []int64
		narrow bool // still uint32s after the last value
	}{
		{"block sizes", allocator.MinBlockBits, []int64{0, 512, 3 * 512, 1 << 40, (1<<32 - 1) << allocator.MinBlockBits, 0}, true},
		{"not a multiple of 512", allocator.MinBlockBits, []int64{512, 1024, 1536 + 1, 2048, 512}, false},
		{"2^32 units", allocator.MinBlockBits, []int64{512, 1 << 41, 512}, false},
		{"negative", allocator.MinBlockBits, []int64{512, -512, 0}, false},
		{"requested gaps", 0, []int64{0, 1, 511, 1<<32 - 1, 7}, true},
		{"negative requested gap", 0, []int64{3, -1, 7}, false},
		{"requested gap of 2^32", 0, []int64{3, 1 << 32, 7}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSeries(len(tt.values), tt.shift)
			for i, v := range tt.values {
				if !s.put(i, v) {
					s.set(i, v)
				}
			}
			if s.len() != len(tt.values) {
				t.Fatalf("len %d, want %d", s.len(), len(tt.values))
			}
			for i, v := range tt.values {
				if got := s.at(i); got != v {
					t.Errorf("at(%d) = %d, want %d", i, got, v)
				}
			}
			if narrow := s.wide == nil; narrow != tt.narrow {
				t.Errorf("narrow %v, want %v", narrow, tt.narrow)
			}
		})
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
