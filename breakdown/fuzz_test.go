package breakdown

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// FuzzReport checks Report, which labels only the blocks live at its
// moments and places only their events' phases, against the report of a
// breakdown of every block, on whatever the decoder and the replay make of
// arbitrary bytes, seeded with the decoder's format fixtures (.ci/fuzz
// runs it in CI): the same report, and no panic.
func FuzzReport(f *testing.F) {
	testutil.FormatSeeds(f)
	filter, _ := callsite.NewFilter("", "")
	f.Fuzz(func(t *testing.T, data []byte) {
		sn, err := snapshot.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		tls, err := replay.Devices(sn)
		if err != nil {
			return
		}
		for _, tl := range tls {
			if tl.Len() < 2 {
				continue
			}
			steps := diagnose.DetectSteps(sn, tl, filter)
			ev := ReadEvents(sn, tl.Device, tl.Trace, Options{Filter: filter})
			want, _ := reportOfAll(ev, tl, steps)
			if got := ev.Report(tl, steps); !reflect.DeepEqual(got, want) {
				t.Fatalf("device %d: the report of the live blocks differs from that of all:\n got %+v\nwant %+v", tl.Device, got, want)
			}
		}
	})
}
