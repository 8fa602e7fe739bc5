package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/vramscope/vramscope/internal/pickle"
)

// genericOnly hides the builder's Dict and List, so the VM opens, fills and
// closes every container on the generic path.
type genericOnly struct{ b *builder }

func (g genericOnly) String(p []byte, isBytes bool) (pickle.Value, error) {
	return g.b.String(p, isBytes)
}
func (g genericOnly) Open(h pickle.Handle, c pickle.Container) error     { return g.b.Open(h, c) }
func (g genericOnly) SetItems(h pickle.Handle, kv []pickle.Value) error  { return g.b.SetItems(h, kv) }
func (g genericOnly) Append(h pickle.Handle, items []pickle.Value) error { return g.b.Append(h, items) }
func (g genericOnly) Close(h pickle.Handle) (pickle.Value, error)        { return g.b.Close(h) }
func (g genericOnly) Tuple(items []pickle.Value) (pickle.Value, error)   { return g.b.Tuple(items) }

// Containers built whole (internal/pickle's fast path) give the same
// snapshot as the generic path, down to the arenas' order: a record list
// closed out of order would leave copies behind. Every real snapshot in the
// repository, protocols 0-5.
func TestWholeContainersMatchGeneric(t *testing.T) {
	for _, path := range repoSnapshots(t) {
		t.Run(strings.TrimPrefix(path, "../"), func(t *testing.T) {
			raw := readRaw(t, path)
			whole, err := Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			b := newBuilder()
			top, err := pickle.NewDecoder(bytes.NewReader(raw), genericOnly{b}, pickle.DefaultLimits).Decode()
			if err == nil {
				b.sn.Protocol = whole.Protocol
				err = b.finish(top)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Records are never copied: lists of them are contiguous runs of
			// their arenas, closed in order.
			nb, ne := 0, 0
			for _, seg := range whole.Segments {
				nb += seg.NumBlocks
			}
			for _, tr := range whole.Traces {
				if tr.arena != nil {
					ne = tr.arena.n
				}
			}
			if ne != whole.events() || len(whole.Blocks) != nb {
				t.Errorf("arenas hold %d events and %d blocks, the snapshot %d and %d: records were copied",
					ne, len(whole.Blocks), whole.events(), nb)
			}
			if !sameSnapshot(whole, b.sn) {
				t.Errorf("whole-container decode differs from the generic one (%d vs %d blocks, %d vs %d events)",
					len(whole.Blocks), len(b.sn.Blocks), whole.events(), b.sn.events())
			}
		})
	}
}

// The trace entries of torch's snapshots are built by Record from compiled
// templates (TestWholeContainersMatchGeneric checks that they come out as
// the generic path builds them): the GPU-made bench seed's and a training
// loop's.
func TestTraceEntriesCompiled(t *testing.T) {
	for _, path := range []string{"../testdata/scenarios/out/bench_source/bench_source.pickle.gz", "testdata/format/train.pickle"} {
		b := newBuilder()
		if _, err := decodeWith(b, bytes.NewReader(readRaw(t, path))); err != nil {
			t.Fatal(err)
		}
		if len(b.tmpls) == 0 {
			t.Errorf("%s: no template of trace entries compiled", path)
		}
		for _, tm := range b.tmpls {
			if !tm.set.has(kAction) || tm.set&^eventFast != 0 {
				t.Errorf("%s: template %+v", path, tm)
			}
		}
	}
}

// repoSnapshots lists every real snapshot in the repository.
func repoSnapshots(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, glob := range []string{"testdata/format/*.pickle", "testdata/legacy/*.pickle", "testdata/newer/*.pickle",
		"testdata/redump/*.gz", "testdata/split/*.gz"} {
		m, _ := filepath.Glob(glob)
		paths = append(paths, m...)
	}
	filepath.WalkDir("../testdata/scenarios/out", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pickle.gz") {
			paths = append(paths, path)
		}
		return err
	})
	if len(paths) < 50 {
		t.Fatalf("found %d fixtures, want the 50+ in the repository", len(paths))
	}
	return paths
}

// events counts the trace entries of all devices.
func (s *Snapshot) events() int {
	n := 0
	for _, tr := range s.Traces {
		n += tr.Len()
	}
	return n
}

func readRaw(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// sameSnapshot reports whether a and b hold the same snapshot, interning
// scratch aside. The generically decoded values (Extra, Settings) compare
// by their printed form, since a pickle's float may be NaN, which
// reflect.DeepEqual finds unequal to itself; fmt prints a map's keys
// sorted, NaN keys included.
func sameSnapshot(a, b *Snapshot) bool {
	ca, cb := *a, *b
	ca.in.key, cb.in.key = nil, nil
	if fmt.Sprintf("%#v %#v", ca.Extra, ca.Settings) != fmt.Sprintf("%#v %#v", cb.Extra, cb.Settings) {
		return false
	}
	ca.Extra, cb.Extra, ca.Settings, cb.Settings = nil, nil, nil, nil
	return reflect.DeepEqual(&ca, &cb)
}
