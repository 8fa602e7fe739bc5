package replay

import (
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// TestAllocationRecords replays blocks of every kind and reads each back
// with Allocation: traced ones from their record and event, the others
// (from the snapshot, from a free, of a size that is not whole 512-byte
// units) from the side table.
func TestAllocationRecords(t *testing.T) {
	pool := snapshot.PoolID{1, 0}
	sn := build(
		[]seg{
			{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{{512, 500, allocated}, {2*mib - 512, 0, inactive}}},
			{addr: b0, size: 20 * mib, pool: pool, blocks: []blk{{1000, 900, allocated}, {20*mib - 1000, 0, inactive}}},
		},
		events(
			snapshot.Event{Action: freeReq, Addr: a0 + 4096, Size: 600, Stack: 3},
			ev(freeDone, a0+4096, 600),
			snapshot.Event{Action: alloc, Addr: a0 + 512, Size: 2000, Stack: 4},
			free(a0+512, 2000),
			snapshot.Event{Action: alloc, Addr: b0, Size: 2 * mib, Stack: 5},
			free(b0, 2*mib),
			// The final snapshot says 1000 bytes.
			ev(alloc, b0, 900),
		),
	)
	tl, err := Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Allocation{
		{Addr: a0, Size: 512, Requested: 500, Start: BeforeRecording, Free: LiveAtEnd, End: LiveAtEnd, Stack: snapshot.NoStack, Origin: FromSnapshot},
		{Addr: a0 + 4096, Size: 1024, Requested: 600, Start: BeforeRecording, Free: 0, End: 1, Stack: 3, Origin: FromFree},
		{Addr: a0 + 512, Size: 2048, Requested: 2000, Start: 2, Free: 3, End: 4, Stack: 4, Origin: Traced},
		{Addr: b0, Size: 2 * mib, Requested: 2 * mib, Pool: pool, Start: 5, Free: 6, End: 7, Stack: 5, Origin: Traced},
		{Addr: b0, Size: 1000, Requested: 900, Pool: pool, Start: 8, Free: LiveAtEnd, End: LiveAtEnd, Origin: Traced},
	}
	if n := tl.NumAllocations(); n != len(want) {
		t.Fatalf("%d allocations, want %d", n, len(want))
	}
	for k, w := range want {
		if got := tl.Allocation(k); got != w {
			t.Errorf("Allocation(%d) = %+v, want %+v", k, got, w)
		}
		if start, free, end := tl.Lifetime(k); start != int(w.Start) || free != int(w.Free) || end != int(w.End) {
			t.Errorf("Lifetime(%d) = %d, %d, %d, want %d, %d, %d", k, start, free, end, w.Start, w.Free, w.End)
		}
	}
	// The two blocks from before the trace and the 1000-byte one.
	if len(tl.full) != 3 {
		t.Errorf("%d allocations in the side table, want 3", len(tl.full))
	}
	checkFinal(t, sn, tl)
	if size := unsafe.Sizeof(allocRecord{}); size != 16 {
		t.Errorf("allocRecord takes %d bytes, want 16", size)
	}
}

// TestNewRecord packs traced blocks up to the limits of a record's size
// and pool fields and keeps the others whole.
func TestNewRecord(t *testing.T) {
	const maxUnits = 1<<unitBits - 1
	tests := []struct {
		name   string
		size   uint64
		pool   int
		origin Origin
		full   bool
	}{
		{"512 bytes", 512, 0, Traced, false},
		{"64 GiB less 512 bytes, last pool", maxUnits << allocator.MinBlockBits, 1<<poolBits - 1, Traced, false},
		{"64 GiB", 64 << 30, 0, Traced, true},
		{"not whole units", 1000, 0, Traced, true},
		{"pool past the field", 512, 1 << poolBits, Traced, true},
		{"from the snapshot", 512, 0, FromSnapshot, true},
		{"from a free", 512, 0, FromFree, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Allocation{Size: tt.size, Start: 3, Free: 5, End: LiveAtEnd, Origin: tt.origin}
			r := newRecord(&a, tt.pool, 7)
			if r.start != a.Start || r.free != a.Free || r.end != a.End {
				t.Errorf("events %d, %d, %d, want %d, %d, %d", r.start, r.free, r.end, a.Start, a.Free, a.End)
			}
			if r.full() != tt.full {
				t.Fatalf("full %v, want %v", r.full(), tt.full)
			}
			if tt.full {
				if r.fullIndex() != 7 {
					t.Errorf("full index %d, want 7", r.fullIndex())
				}
				return
			}
			if size := uint64(r.units()) << allocator.MinBlockBits; size != tt.size || r.pool() != tt.pool {
				t.Errorf("size %d, pool %d, want %d, %d", size, r.pool(), tt.size, tt.pool)
			}
		})
	}
}

// TestBlocksAtInRanges checks LiveAt and AllocatedAt, scanned in ranges of
// 3 allocations on 4 cores, against their definitions read off each
// Allocation, at the start, the peaks, 40 events spread over the trace, the
// last event and after the end, on every fixture.
func TestBlocksAtInRanges(t *testing.T) {
	defer func(n int) { blocksRangeMin = n }(blocksRangeMin)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	blocksRangeMin = 3
	split := 0
	for _, path := range testutil.Fixtures(t) {
		sn := testutil.Snapshot(t, path)
		tls, err := Devices(sn)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, tl := range tls {
			moments := []int{BeforeRecording, tl.Len() - 1, LiveAtEnd - 1}
			for m := range tl.peaks {
				moments = append(moments, tl.peaks[m].Index)
			}
			for i := 0; i < tl.Len(); i += max(1, tl.Len()/40) {
				moments = append(moments, i)
			}
			for _, i := range moments {
				var live, allocated []int
				for k := range tl.NumAllocations() {
					a := tl.Allocation(k)
					if a.ActiveAt(i) {
						live = append(live, k)
					}
					if a.AllocatedAt(i) {
						allocated = append(allocated, k)
					}
				}
				if got := tl.LiveAt(i); !slices.Equal(got, live) {
					t.Errorf("%s device %d: LiveAt(%d) = %d blocks, want %d", path, tl.Device, i, len(got), len(live))
				}
				if got := tl.AllocatedAt(i); !slices.Equal(got, allocated) {
					t.Errorf("%s device %d: AllocatedAt(%d) = %d blocks, want %d", path, tl.Device, i, len(got), len(allocated))
				}
				if len(live) > 3 {
					split++
				}
			}
		}
	}
	if split < 100 {
		t.Errorf("%d moments had blocks in more than one range, want 100+", split)
	}
}
