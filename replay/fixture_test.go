package replay

import (
	"github.com/vramscope/vramscope/internal/testutil"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

func readFixture(t *testing.T, name string) *snapshot.Snapshot {
	return testutil.Snapshot(t, filepath.Join("..", "snapshot", "testdata", "format", name))
}

// TestFixturesReproduceFinalState is the replay's invariant on every real
// snapshot: replaying the whole trace from the reconstructed start ends in
// the final snapshot, in totals and block by block.
func TestFixturesReproduceFinalState(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no fixtures")
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			sn := readFixture(t, name)
			tls, err := Devices(sn)
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range tls {
				checkFinal(t, sn, tl)
				checkStatesMatchSeries(t, tl)
				for _, c := range tl.Caveats {
					t.Logf("device %d: %v", tl.Device, c)
					if c.Kind == FinalMismatch || c.Kind == LayoutConflict || c.Kind == UnknownAddress {
						t.Errorf("device %d: %v", tl.Device, c)
					}
				}
			}
		})
	}
}

// checkFinal compares the timeline's last values and state with sn's
// segments for tl's device.
func checkFinal(t *testing.T, sn *snapshot.Snapshot, tl *Timeline) {
	t.Helper()
	var want Sample
	var segs []snapshot.Segment
	for _, s := range sn.Segments {
		if s.Device != tl.Device {
			continue
		}
		segs = append(segs, s)
		want.Reserved += int64(s.TotalSize)
		want.Allocated += int64(s.AllocatedSize)
		want.Active += int64(s.ActiveSize)
		for _, b := range sn.SegmentBlocks(&s) {
			if b.State == snapshot.ActiveAllocated {
				want.Requested += int64(b.RequestedSize)
			}
		}
	}
	if got := tl.At(tl.Len() - 1); got != want {
		t.Errorf("device %d: end of timeline %+v, snapshot %+v", tl.Device, got, want)
	}
	st, err := tl.State(tl.Len() - 1)
	if err != nil {
		t.Fatal(err)
	}
	compareState(t, sn, segs, st)
}

// compareState checks st against the snapshot's segments: same segments,
// same blocks (requested sizes only for active blocks: inactive ones keep a
// stale value).
func compareState(t *testing.T, sn *snapshot.Snapshot, want []snapshot.Segment, st *State) {
	t.Helper()
	if st.Orphans != 0 {
		t.Errorf("%d orphan blocks", st.Orphans)
	}
	if len(st.Segments) != len(want) {
		t.Errorf("%d segments, want %d", len(st.Segments), len(want))
	}
	wantSegs := map[uint64]*snapshot.Segment{}
	for i := range want {
		wantSegs[want[i].Address] = &want[i]
	}
	for i := range st.Segments {
		got := &st.Segments[i]
		w, ok := wantSegs[got.Address]
		if !ok {
			t.Errorf("segment %#x (%d bytes) not in the snapshot", got.Address, got.TotalSize)
			continue
		}
		if got.TotalSize != w.TotalSize || got.AllocatedSize != w.AllocatedSize || got.ActiveSize != w.ActiveSize ||
			got.RequestedSize != w.RequestedSize || got.Pool != w.Pool || got.Stream != w.Stream ||
			got.Type != w.Type || got.Expandable != w.Expandable {
			t.Errorf("segment %#x: got %+v, want %+v", got.Address, *got, *w)
		}
		gb, wb := st.Blocks[got.FirstBlock:got.FirstBlock+got.NumBlocks], sn.SegmentBlocks(w)
		if len(gb) != len(wb) {
			t.Errorf("segment %#x: %d blocks, want %d", got.Address, len(gb), len(wb))
			continue
		}
		for k := range gb {
			g, w := gb[k], wb[k]
			if !w.State.Active() {
				w.RequestedSize, w.Stack = 0, snapshot.EmptyStack
			}
			if w.Stack == snapshot.EmptyStack && g.Stack == snapshot.NoStack {
				w.Stack = snapshot.NoStack // context=None: the event has no frames, the block []
			}
			if g != w {
				t.Errorf("segment %#x block %d: got %+v, want %+v", got.Address, k, g, w)
			}
		}
	}
}

// checkStatesMatchSeries checks that State(i) and the series agree at every
// event, from before the first one.
func checkStatesMatchSeries(t *testing.T, tl *Timeline) {
	t.Helper()
	for i := BeforeRecording; i < tl.Len(); i++ {
		st, err := tl.State(i)
		if err != nil {
			t.Fatal(err)
		}
		var got Sample
		for _, s := range st.Segments {
			got.Reserved += int64(s.TotalSize)
			got.Allocated += int64(s.AllocatedSize)
			got.Active += int64(s.ActiveSize)
			blocks := st.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks]
			for k, b := range blocks {
				if b.State == snapshot.ActiveAllocated {
					got.Requested += int64(b.RequestedSize)
				}
				if k > 0 && b.State == snapshot.Inactive && blocks[k-1].State == snapshot.Inactive {
					t.Errorf("event %d: unmerged inactive blocks at %#x", i, b.Address)
				}
			}
		}
		if want := tl.At(i); got != want || st.Orphans != 0 {
			t.Errorf("event %d: state sums %+v (%d orphans), series %+v", i, got, st.Orphans, want)
		}
	}
}

// TestCaveatsOfLiveBlocks tells live blocks the trace does not show apart
// by whether the snapshot gives their stack: ring.pickle (max_entries=25)
// lost the allocs of 15 blocks (185.50 MiB, summed with pickle in Python) that keep their stacks, prehistory.pickle
// holds 2 blocks allocated before recording, without one; a file without a
// trace says so instead. Sizes read as sizes, not byte counts.
func TestCaveatsOfLiveBlocks(t *testing.T) {
	for _, c := range []struct {
		file string
		kind CaveatKind
		text string
	}{
		{"ring.pickle", BlocksBeforeTrace, "allocated before the oldest event of the trace: 15 live blocks (185.50 MiB), whose stacks the snapshot still gives"},
		{"prehistory.pickle", BlocksBeforeRecording, "allocated before recording started: 2 live blocks (6.00 MiB), whose stacks are unknown"},
		// torch.cuda.memory_snapshot() pickled: no trace to be before.
		{"../legacy/v2_11_segment_list.pickle", NoTrace, "no trace events: only the final state is known, 18 live blocks (192.50 MiB)"},
	} {
		tl, err := Device(readFixture(t, c.file), 0)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, cv := range tl.Caveats {
			found = append(found, cv.String())
			if (cv.Kind == BlocksBeforeRecording || cv.Kind == BlocksBeforeTrace || cv.Kind == NoTrace) && cv.Kind != c.kind {
				t.Errorf("%s: %v", c.file, cv)
			}
		}
		if !slices.Contains(found, c.text) {
			t.Errorf("%s: caveats %q, want %q among them", c.file, found, c.text)
		}
	}
}
