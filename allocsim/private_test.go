package allocsim

import (
	"testing"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// TestPrivatePoolsStayFixed: under another setting, the segments of a CUDA
// graph pool (0x7fd092000000) and a MemPool (0x7fd0b0800000) are still
// reserved where the trace reserved them, and no default-pool request is
// served from them.
func TestPrivatePoolsStayFixed(t *testing.T) {
	sn := load(t, "snapshot/testdata/format/graphs_pools.pickle")
	rec, err := Record(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := allocator.Parse("expandable_segments:True")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(sn, rec, s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int{0x7fd092000000: 12, 0x7fd0b0800000: 0} // address: trace event
	var maps int
	for _, e := range res.events {
		switch {
		case e.Action == snapshot.ActionSegmentAlloc:
			if at, ok := want[e.Addr]; !ok || e.Size != 20<<20 || e.At != at {
				t.Errorf("segment_alloc %#x of %d at event %d: want only the private pools' 20 MiB, where recorded", e.Addr, e.Size, e.At)
			}
			delete(want, e.Addr)
		case e.Action == snapshot.ActionSegmentMap:
			maps++
		}
	}
	if len(want) > 0 || maps == 0 {
		t.Errorf("private segments not reserved: %v; %d pages mapped for the default pool", want, maps)
	}
}
