package breakdown

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

// TestFormatFixtures checks categories torch's recordings make certain on
// the format fixtures (torch 2.11, H200): train.pickle's cuBLAS workspaces
// (32 MiB under the first Linear forward plus cuBLASLt's 1 MiB, and 32 MiB
// on the autograd thread, stacks="python" so by lifetime alone), its Adam
// state twice the parameters and its gradients equal to them;
// graphs_pools.pickle's capture pool (1,0) and MemPool (0,1) segments;
// prehistory.pickle's blocks allocated before recording started.
func TestFormatFixtures(t *testing.T) {
	tests := []struct {
		file string
		want map[Category]int64 // bytes at the allocated peak
	}{
		{"train.pickle", map[Category]int64{
			Workspace: 32<<20 + 1<<20 + 32<<20, Parameter: 33574912, Gradient: 33574912,
			OptimizerState: 2 * 33574912, BeforeRecording: 12 << 20, Unknown: 0,
		}},
		{"graphs_pools.pickle", map[Category]int64{GraphPool: 8<<20 + 3<<20}},
		{"prehistory.pickle", map[Category]int64{BeforeRecording: 6 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			sn := testutil.Snapshot(t, filepath.Join("..", "snapshot", "testdata", "format", tc.file))
			tl, err := replay.Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := Classify(sn, tl, Options{})
			tab := b.Table(tl.Peak(replay.Allocated).Index, ByCategory)
			if tab.Total != tl.Peak(replay.Allocated).Bytes {
				t.Errorf("table total %d, allocated peak %d", tab.Total, tl.Peak(replay.Allocated).Bytes)
			}
			for c, want := range tc.want {
				if got := tab.Bytes(string(c)); got != want {
					t.Errorf("%s at the peak: %d bytes, want %d (table %v)", c, got, want, tab.Rows)
				}
			}
		})
	}
}

// TestSweepAgainstReplay checks sweep, which the summaries and series
// take their bytes from, against the replay's own allocated series: with
// every label in one group, the bytes right after each moment are the
// allocated bytes there, on every format fixture. The moments repeat some
// events, as a peak that is also the end does.
func TestSweepAgainstReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			sn := testutil.Snapshot(t, file)
			for _, n := range sn.Devices() {
				tl, err := replay.Device(sn, n)
				if err != nil || tl.Len() == 0 {
					continue
				}
				b := Classify(sn, tl, Options{})
				var at []int
				step := max(tl.Len()/500, 1)
				for i := 0; i < tl.Len(); i += step {
					at = append(at, i, i)
				}
				at = append(at, tl.Len()-1)
				one := make([]int, len(b.labels))
				for j, bytes := range b.sweep(at, spans(tl, at), one, 1) {
					if want := tl.Value(replay.Allocated, at[j]); bytes[0] != want {
						t.Fatalf("device %d, event %d: swept %d bytes, replay %d", n, at[j], bytes[0], want)
					}
				}
			}
		})
	}
}
