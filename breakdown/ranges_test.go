package breakdown

import (
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/replay/replaytest"
)

// TestClassifyInRanges checks that Classify labels every block as one
// range does when its passes run in ranges of 7 events or blocks on 4
// cores: the same labels in the same order, on every format and scenario
// fixture (workspaces by lifetime, optimizer steps, backward calls and
// forwards cross the ranges' bounds).
func TestClassifyInRanges(t *testing.T) {
	defer func(n int) { rangeLen = n }(rangeLen)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	split := 0
	for d := range replaytest.Fixtures(t) {
		sn, tl, file, n := d.Sn, d.Tl, d.File, d.Tl.Device
		rangeLen = 1 << 30
		one := Classify(sn, tl, Options{})
		rangeLen = 7
		many := Classify(sn, tl, Options{})
		if !slices.Equal(one.labels, many.labels) || !slices.Equal(one.of, many.of) {
			t.Errorf("%s device %d: labels in ranges differ from those of one range", file, n)
		}
		if len(one.labels) > 1 && tl.NumAllocations() > 4*7 {
			split++
		}
	}
	if split < 20 {
		t.Errorf("%d traces had several labels over several ranges, want 20+", split)
	}
}

// TestStepPeaksAndReportInRanges checks that the steps' peaks found in 4
// ranges (on 4 cores) are those of one range, and so are the report's
// bytes by category at the peak, the end and every step, summed over 4
// ranges of the blocks, on every fixture.
func TestStepPeaksAndReportInRanges(t *testing.T) {
	defer func(n int) { rangeLen = n }(rangeLen)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	f, _ := callsite.NewFilter("", "")
	split, reports := 0, 0
	for d := range replaytest.Fixtures(t) {
		sn, tl, file, n := d.Sn, d.Tl, d.File, d.Tl.Device
		steps := diagnose.DetectSteps(sn, tl, f)
		ev := ReadEvents(sn, tl.Device, tl.Trace, Options{})
		rangeLen = 1 << 30
		one, oneReport := StepPeaks(tl, steps), ev.Report(tl, steps)
		rangeLen = 1
		many, manyReport := StepPeaks(tl, steps), ev.Report(tl, steps)
		if !slices.Equal(one, many) {
			t.Errorf("%s device %d: step peaks in ranges differ from those of one range", file, n)
		}
		if len(one) != len(steps.Steps) {
			t.Errorf("%s device %d: %d step peaks for %d steps", file, n, len(one), len(steps.Steps))
		}
		if !reflect.DeepEqual(oneReport, manyReport) {
			t.Errorf("%s device %d: the report in ranges differs from that of one range", file, n)
		}
		if len(one) >= 4 {
			split++
		}
		if len(oneReport.Peak.Categories) > 1 && tl.NumAllocations() >= 4 {
			reports++
		}
	}
	if split < 8 {
		t.Errorf("%d traces had 4+ steps (4 ranges), want 8+", split)
	}
	if reports < 20 {
		t.Errorf("%d traces had several categories over 4 ranges of blocks, want 20+", reports)
	}
}

// TestPhasesSettleRuns checks the events' phases, whose runs without
// Python frames Classify's pass settles at their ends, against phaseOf,
// which asks During for each event as a Report does, in one range and in
// ranges of 7 events on 4 cores, on every fixture.
func TestPhasesSettleRuns(t *testing.T) {
	defer func(n int) { rangeLen = n }(rangeLen)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	f, _ := callsite.NewFilter("", "")
	backward := 0
	for d := range replaytest.Fixtures(t) {
		sn, tr, file, n := d.Sn, d.Tl.Trace, d.File, d.Tl.Device
		for _, l := range []int{1 << 30, 7} {
			rangeLen = l
			ev := ReadEvents(sn, n, tr, Options{Filter: f})
			phases := ev.allPhases()
			scan := diagnose.NewBackwardScan(sn, tr, f)
			optim, zero := ev.windowCursors()
			for i := range tr.Len() {
				stack := tr.At(i).Stack
				want := ev.phaseOf(i, stack, scan, &optim, &zero)
				if want == phaseBackward && ev.info(stack).phase != phaseBackward && l == 7 {
					backward++ // During placed it
				}
				if phases[i] != want {
					t.Fatalf("%s device %d, ranges of %d: event %d in %v, During says %v", file, n, l, i, phases[i], want)
				}
			}
		}
	}
	if backward < 1000 {
		t.Errorf("%d events placed in a backward() call by During, want 1000+", backward)
	}
}
