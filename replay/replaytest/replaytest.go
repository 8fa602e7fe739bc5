// Package replaytest replays the repository's real snapshots for the
// tests of the packages that read timelines. Only _test.go files import it.
package replaytest

import (
	"iter"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Device is one device of a fixture, replayed.
type Device struct {
	File string
	Sn   *snapshot.Snapshot
	Tl   *replay.Timeline
}

// Fixtures yields every device with events of every fixture
// (testutil.Fixtures), replayed; a device the replay refuses is left out,
// as the commands leave it out.
func Fixtures(tb testing.TB) iter.Seq[Device] {
	files := testutil.Fixtures(tb)
	return func(yield func(Device) bool) {
		for _, file := range files {
			sn := testutil.Snapshot(tb, file)
			for _, n := range sn.Devices() {
				tl, err := replay.Device(sn, n)
				if err != nil || tl.Len() == 0 {
					continue
				}
				if !yield(Device{File: file, Sn: sn, Tl: tl}) {
					return
				}
			}
		}
	}
}
