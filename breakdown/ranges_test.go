package breakdown

import (
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

// TestClassifyInRanges checks that Classify labels every block as one
// range does when its passes run in ranges of 7 events or blocks on 4
// cores: the same labels in the same order, on every format and scenario
// fixture (workspaces by lifetime, optimizer steps, backward calls and
// forwards cross the ranges' bounds).
func TestClassifyInRanges(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "snapshot", "testdata", "format", "*.pickle*"))
	filepath.WalkDir(filepath.Join("..", "testdata", "scenarios", "out"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pickle.gz") {
			files = append(files, path)
		}
		return err
	})
	if len(files) < 40 {
		t.Fatalf("found %d fixtures, want the 40+ in the repository", len(files))
	}
	defer func(n int) { rangeLen = n }(rangeLen)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	split := 0
	for _, file := range files {
		sn := testutil.Snapshot(t, file)
		for _, n := range sn.Devices() {
			tl, err := replay.Device(sn, n)
			if err != nil || tl.Len() == 0 {
				continue
			}
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
	}
	if split < 20 {
		t.Errorf("%d traces had several labels over several ranges, want 20+", split)
	}
}
