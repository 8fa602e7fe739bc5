package snapshot

import (
	"bufio"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/klauspost/compress/gzip"
	gopickle "github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// TestAgainstGopickle decodes every fixture a second time with a generic,
// independent unpickler (github.com/nlpodyssey/gopickle, used only here) and
// checks that the typed model holds exactly the same data, field by field.
// og-rek is not used as an oracle: it decodes lists referenced twice as
// empty, which would drop shared frame lists.
func TestAgainstGopickle(t *testing.T) {
	files, _ := filepath.Glob("testdata/format/*.pickle")
	more, _ := filepath.Glob("testdata/redump/*.pickle.gz")
	for _, path := range append(files, more...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tree := oracleLoad(t, path)
			sn := readFixture(t, path)
			compareTree(t, sn, tree)
		})
	}
}

func oracleLoad(t *testing.T, path string) *types.Dict {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if filepath.Ext(path) == ".gz" {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = bufio.NewReader(zr)
	}
	u := gopickle.NewUnpickler(r)
	v, err := u.Load()
	if err != nil {
		t.Fatalf("gopickle: %v", err)
	}
	d, ok := v.(*types.Dict)
	if !ok {
		t.Fatalf("gopickle: top is %T", v)
	}
	return d
}

func get(d *types.Dict, k string) (any, bool) { return d.Get(k) }

func asU64(t *testing.T, v any) uint64 {
	t.Helper()
	switch x := v.(type) {
	case int:
		return uint64(x)
	case *big.Int:
		return x.Uint64()
	case bool:
		if x {
			return 1
		}
		return 0
	}
	t.Fatalf("not an int: %T %v", v, v)
	return 0
}

func list(t *testing.T, v any) []any {
	t.Helper()
	switch x := v.(type) {
	case *types.List:
		return *x
	case *types.Tuple:
		return *x
	}
	t.Fatalf("not a list: %T", v)
	return nil
}

func compareTree(t *testing.T, sn *Snapshot, top *types.Dict) {
	segsV, _ := get(top, "segments")
	segs := list(t, segsV)
	if len(segs) != len(sn.Segments) {
		t.Fatalf("segments: oracle %d, model %d", len(segs), len(sn.Segments))
	}
	for i, sv := range segs {
		sd := sv.(*types.Dict)
		s := &sn.Segments[i]
		where := fmt.Sprintf("segment %d", i)
		field := func(k string, got uint64) {
			v, _ := get(sd, k)
			if w := asU64(t, v); w != got {
				t.Errorf("%s %s: oracle %d, model %d", where, k, w, got)
			}
		}
		field("device", uint64(s.Device))
		field("address", s.Address)
		field("total_size", s.TotalSize)
		field("allocated_size", s.AllocatedSize)
		field("active_size", s.ActiveSize)
		field("requested_size", s.RequestedSize)
		field("stream", uint64(sn.Stream(s.Stream)))
		field("is_expandable", b2u(s.Expandable))
		st, _ := get(sd, "segment_type")
		if st.(string) != s.Type.String() {
			t.Errorf("%s type: oracle %v, model %v", where, st, s.Type)
		}
		pv, _ := get(sd, "segment_pool_id")
		p := list(t, pv)
		if int64(asU64(t, p[0])) != s.Pool[0] || int64(asU64(t, p[1])) != s.Pool[1] {
			t.Errorf("%s pool: oracle %v, model %v", where, p, s.Pool)
		}
		compareFrames(t, where, sn, sd, s.Stack)
		bv, _ := get(sd, "blocks")
		blocks := list(t, bv)
		if len(blocks) != s.NumBlocks {
			t.Fatalf("%s: oracle %d blocks, model %d", where, len(blocks), s.NumBlocks)
		}
		for j, bv := range blocks {
			bd := bv.(*types.Dict)
			b := sn.SegmentBlocks(s)[j]
			bw := fmt.Sprintf("%s block %d", where, j)
			for k, got := range map[string]uint64{"address": b.Address, "size": b.Size, "requested_size": b.RequestedSize} {
				v, _ := get(bd, k)
				if w := asU64(t, v); w != got {
					t.Errorf("%s %s: oracle %d, model %d", bw, k, w, got)
				}
			}
			if st, _ := get(bd, "state"); st.(string) != b.State.String() {
				t.Errorf("%s state: oracle %v, model %v", bw, st, b.State)
			}
			compareFrames(t, bw, sn, bd, b.Stack)
		}
	}
	trV, _ := get(top, "device_traces")
	traces := list(t, trV)
	if len(traces) != len(sn.Traces) {
		t.Fatalf("traces: oracle %d, model %d", len(traces), len(sn.Traces))
	}
	for d, tv := range traces {
		entries := list(t, tv)
		tr := sn.Traces[d]
		if len(entries) != tr.Len() {
			t.Fatalf("device %d: oracle %d events, model %d", d, len(entries), tr.Len())
		}
		for i, ev := range entries {
			ed := ev.(*types.Dict)
			e := tr.At(i)
			where := fmt.Sprintf("device %d event %d", d, i)
			act, _ := get(ed, "action")
			if act.(string) != e.Action.String() {
				t.Errorf("%s action: oracle %v, model %v", where, act, e.Action)
			}
			addrKey := "addr"
			if e.Action == ActionOOM {
				addrKey = "device_free"
			}
			for k, got := range map[string]uint64{addrKey: e.Addr, "size": e.Size, "time_us": uint64(e.TimeUS), "stream": uint64(sn.Stream(e.Stream))} {
				v, _ := get(ed, k)
				if w := asU64(t, v); w != got {
					t.Errorf("%s %s: oracle %d, model %d", where, k, w, got)
				}
			}
			c := tr.Context(i)
			for k, got := range map[string]string{"compile_context": sn.String(c.CompileContext), "user_metadata": sn.String(c.UserMetadata)} {
				if v, _ := get(ed, k); v.(string) != got {
					t.Errorf("%s %s: oracle %q, model %q", where, k, v, got)
				}
			}
			compareFrames(t, where, sn, ed, e.Stack)
		}
	}
	annV, _ := get(top, "external_annotations")
	anns := list(t, annV)
	if len(anns) != len(sn.Annotations) {
		t.Fatalf("annotations: oracle %d, model %d", len(anns), len(sn.Annotations))
	}
	for i, av := range anns {
		ad := av.(*types.Dict)
		a := sn.Annotations[i]
		stage, _ := get(ad, "stage")
		name, _ := get(ad, "name")
		tm, _ := get(ad, "time_us")
		dev, _ := get(ad, "device")
		if stage.(string) != a.Stage || name.(string) != a.Name || int64(asU64(t, tm)) != a.TimeUS || int(asU64(t, dev)) != a.Device {
			t.Errorf("annotation %d: oracle %v, model %+v", i, ad, a)
		}
	}
	setV, _ := get(top, "allocator_settings")
	if want := plain(setV); !reflect.DeepEqual(want, sn.Settings.Raw) {
		t.Errorf("allocator_settings: oracle %v, model %v", want, sn.Settings.Raw)
	}
}

// compareFrames checks a record's "frames" against its interned stack:
// an absent key must be NoStack, and frames must match in order.
func compareFrames(t *testing.T, where string, sn *Snapshot, d *types.Dict, id StackID) {
	t.Helper()
	fv, ok := get(d, "frames")
	if !ok {
		if id != NoStack {
			t.Errorf("%s: no frames key, model stack %d", where, id)
		}
		return
	}
	frames := list(t, fv)
	got := sn.Stack(id)
	if id == NoStack || len(frames) != len(got) {
		t.Fatalf("%s: oracle %d frames, model stack %d with %d", where, len(frames), id, len(got))
	}
	for i, f := range frames {
		fd := f.(*types.Dict)
		name, _ := get(fd, "name")
		file, _ := get(fd, "filename")
		line, _ := get(fd, "line")
		want := Frame{Name: name.(string), Filename: file.(string), Line: asU64(t, line)}
		if sn.Frames[got[i]] != want {
			t.Errorf("%s frame %d: oracle %v, model %v", where, i, want, sn.Frames[got[i]])
		}
	}
}

// plain converts a gopickle tree to the generic types Settings.Raw uses.
func plain(v any) any {
	switch x := v.(type) {
	case *types.Dict:
		m := map[string]any{}
		for _, e := range *x {
			m[fmt.Sprint(e.Key)] = plain(e.Value)
		}
		return m
	case *types.List:
		out := []any{}
		for _, it := range *x {
			out = append(out, plain(it))
		}
		return out
	case int:
		return int64(x)
	}
	return v
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
