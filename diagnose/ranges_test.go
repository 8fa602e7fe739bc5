package diagnose

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay/replaytest"
)

// TestPeakInRanges checks that the peak report, whose best line to
// remove is searched for in ranges of the allocations, is the one of a
// single range when the ranges hold 7 allocations on 4 cores, on every
// format and scenario fixture.
func TestPeakInRanges(t *testing.T) {
	defer func(n int) { rangeLen = n }(rangeLen)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	f, _ := callsite.NewFilter("", "")
	lines := 0
	for d := range replaytest.Fixtures(t) {
		sn, tl, file, n := d.Sn, d.Tl, d.File, d.Tl.Device
		rangeLen = 1 << 30
		one := Peak(sn, tl, f)
		rangeLen = 7
		many := Peak(sn, tl, f)
		if !reflect.DeepEqual(one, many) {
			t.Errorf("%s device %d: the peak report in ranges differs from that of one range", file, n)
		}
		if one.Line != nil && one.Line.Blocks > 2*7 {
			lines++
		}
	}
	if lines < 10 {
		t.Errorf("%d traces had a best line of more blocks than two ranges hold, want 10+", lines)
	}
}
