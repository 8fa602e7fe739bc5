package replay

import (
	"bytes"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// FuzzReplay replays whatever the decoder makes of arbitrary bytes, seeded
// with the decoder's format fixtures (.ci/fuzz runs it in CI): on one
// placer and on shards, the replay must return timelines or an error
// without panicking, whatever the segments, blocks and trace say. Crashers
// found by `go test -fuzz=FuzzReplay` are kept under testdata/fuzz/FuzzReplay
// and replayed by every plain `go test`.
func FuzzReplay(f *testing.F) {
	testutil.FormatSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		sn, err := snapshot.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		for d := range sn.Devices() {
			var tr snapshot.Trace
			if d < len(sn.Traces) {
				tr = sn.Traces[d]
			}
			for _, st := range []stages{{1, 1, 1, 1}, {4, 2, 3, 16}} {
				replayDevice(sn, d, tr, st)
			}
		}
	})
}
