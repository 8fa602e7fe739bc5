package pickle

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"
)

// Shapes read most dicts of a trace-like stream whose layouts change more
// often than a template keeps shapes (testdata/make_layouts.py), and of
// containers.json's entries, with the generic path's results: every
// value, memo entry and frames list as fast() and step build them.
func TestShapesRead(t *testing.T) {
	data := readCases(t, "testdata/containers.json")
	inputs := []struct {
		name  string
		raw   []byte
		least int // dicts read by a shape, of the dicts entry read
	}{
		{"layouts", gunzipFile(t, "testdata/layouts.pickle.gz"), 4500}, // of 6,000: 4,974
	}
	for _, c := range data.Cases {
		if c.Name == "entries" && c.Protocol >= 4 || c.Name == "entries_varied" {
			b, _ := hex.DecodeString(c.Hex)
			least := map[string]int{"entries": 700, "entries_varied": 30}[c.Name] // of 800, of 602 (whose keys change)
			inputs = append(inputs, struct {
				name  string
				raw   []byte
				least int
			}{c.Name, b, least})
		}
	}
	for _, in := range inputs {
		g := newTreeSink()
		generic, err := NewDecoder(bytes.NewReader(in.raw), g, DefaultLimits).Decode()
		if err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		for _, reuse := range []bool{false, true} {
			s := &recordTreeSink{wholeTreeSink: &wholeTreeSink{treeSink: newTreeSink()}, reuse: reuse}
			d := NewDecoder(bytes.NewReader(in.raw), s, DefaultLimits)
			v, err := d.Decode()
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			if !reflect.DeepEqual(s.plain(v), g.plain(generic)) {
				t.Errorf("%s, lists kept %v: the shapes' result differs from the generic path's", in.name, reuse)
			}
			if d.ent.shaped < in.least {
				t.Errorf("%s, lists kept %v: %d dicts read by a shape (of %d read by entry), want at least %d",
					in.name, reuse, d.ent.shaped, d.ent.read, in.least)
			}
		}
	}
}
