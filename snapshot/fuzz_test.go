package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder, seeded with every real
// fixture, legacy format and hostile file (.ci/fuzz runs it in CI). It must return (a snapshot or an error) without
// panicking; crashers found by `go test -fuzz=FuzzDecode` are kept under
// testdata/fuzz/FuzzDecode and replayed by every plain `go test`.
func FuzzDecode(f *testing.F) {
	for _, glob := range []string{"testdata/format/*.pickle", "testdata/hostile/*.pickle", "testdata/legacy/*.pickle"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			raw, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sn, err := Decode(bytes.NewReader(data))
		if err == nil && sn == nil {
			t.Fatal("nil snapshot without an error")
		}
		if err != nil {
			return
		}
		// A decoded snapshot must be safe to walk.
		for i := range sn.Segments {
			s := &sn.Segments[i]
			if s.FirstBlock < 0 || s.FirstBlock+s.NumBlocks > len(sn.Blocks) {
				t.Fatalf("segment %d: blocks [%d,+%d) outside %d", i, s.FirstBlock, s.NumBlocks, len(sn.Blocks))
			}
			for _, b := range sn.SegmentBlocks(s) {
				_ = sn.Stack(b.Stack)
			}
		}
		for _, tr := range sn.Traces {
			for i, e := range tr.All() {
				for _, fr := range sn.Stack(e.Stack) {
					_ = sn.Frames[fr]
				}
				_ = sn.String(tr.Context(i).CompileContext) + sn.String(tr.Context(i).UserMetadata)
				_ = sn.Stream(e.Stream)
			}
		}
	})
}
