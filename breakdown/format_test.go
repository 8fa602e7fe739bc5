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
