package summary

import (
	"github.com/vramscope/vramscope/internal/testutil"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

func readFixture(t *testing.T, path string) *snapshot.Snapshot { return testutil.Snapshot(t, path) }

// TestFixtureTotals checks, on every real snapshot, that the four byte
// totals are the sums of the segment fields (which torch guarantees equal
// memory_stats), that pools add up to their device, and that reserved
// memory is exactly active plus free.
func TestFixtureTotals(t *testing.T) {
	paths, err := filepath.Glob("../snapshot/testdata/format/*.pickle")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range paths {
		sn := readFixture(t, path)
		want := map[int]Usage{}
		for _, seg := range sn.Segments {
			u := want[seg.Device]
			u.ReservedBytes += seg.TotalSize
			u.AllocatedBytes += seg.AllocatedSize
			u.ActiveBytes += seg.ActiveSize
			u.RequestedBytes += seg.RequestedSize
			u.Segments++
			u.Blocks += seg.NumBlocks
			want[seg.Device] = u
		}
		s := Of(sn)
		for _, d := range s.Devices {
			w := want[d.Device]
			got := Usage{
				ReservedBytes: d.ReservedBytes, AllocatedBytes: d.AllocatedBytes, ActiveBytes: d.ActiveBytes,
				RequestedBytes: d.RequestedBytes, Segments: d.Segments, Blocks: d.Blocks,
			}
			if got != w {
				t.Errorf("%s device %d:\n got %+v\nwant %+v", path, d.Device, got, w)
			}
			if d.ActiveBytes+d.FreeBytes() != d.ReservedBytes {
				t.Errorf("%s device %d: active %d + free %d != reserved %d", path, d.Device, d.ActiveBytes, d.FreeBytes(), d.ReservedBytes)
			}
			var pools Usage
			for _, p := range d.Pools {
				pools.ReservedBytes += p.ReservedBytes
				pools.AllocatedBytes += p.AllocatedBytes
				pools.ActiveBytes += p.ActiveBytes
				pools.RequestedBytes += p.RequestedBytes
				pools.Segments += p.Segments
				pools.Blocks += p.Blocks
			}
			if pools != w {
				t.Errorf("%s device %d: pools add up to %+v, want %+v", path, d.Device, pools, w)
			}
		}
	}
}

// TestFixtureCaveats pins the caveats each fixture was made to exercise
// (see snapshot/testdata/format/README.md).
func TestFixtureCaveats(t *testing.T) {
	tests := []struct {
		file string
		want []CaveatKind
	}{
		{"default.pickle", []CaveatKind{}},
		{"cpp_pickled.pickle", []CaveatKind{}},
		{"ring.pickle", []CaveatKind{RingWrapped}},
		{"state_only.pickle", []CaveatKind{StateOnly}},
		{"nocontext.pickle", []CaveatKind{NoFrames}},
		{"prehistory.pickle", []CaveatKind{PreRecording}},
		{"train.pickle", []CaveatKind{EmptyAllocStacks, PreRecording}},
		{"pending.pickle", []CaveatKind{}},
		// Older layouts (snapshot/testdata/legacy/README.md): only the 1.12
		// list lacks requested sizes; a pickled memory_snapshot() list holds
		// no trace but real sizes and stacks; torch 2.0 kept one trace entry.
		{"../legacy/v1_12_list.pickle", []CaveatKind{NoTrace, NoFrames, LegacyFormat}},
		{"../legacy/v1_13_list.pickle", []CaveatKind{NoTrace}},
		{"../legacy/v2_11_segment_list.pickle", []CaveatKind{NoTrace}},
		{"../legacy/v2_0.pickle", []CaveatKind{StateOnly}},
		{"../legacy/v2_0_history.pickle", []CaveatKind{NoTimestamps}},
	}
	for _, test := range tests {
		s := Of(readFixture(t, filepath.Join("../snapshot/testdata/format", test.file)))
		got := []CaveatKind{}
		for _, d := range s.Devices {
			got = append(got, kinds(d.Caveats)...)
		}
		got = append(got, kinds(s.Caveats)...)
		if !slices.Equal(got, test.want) {
			t.Errorf("%s: caveats %v, want %v", test.file, got, test.want)
		}
	}
}
