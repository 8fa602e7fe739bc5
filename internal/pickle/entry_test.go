package pickle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// entry reads the trace-entry-like dicts of containers.json by template,
// and leaves to fast() those it cannot read, with the same results as the
// generic path (TestAgainstCPython checks them against CPython): most of
// "entries", and some of "entries_varied", whose keys, values and frames
// lists change from one entry to the next.
func TestEntriesRead(t *testing.T) {
	data := readCases(t, "testdata/containers.json")
	least := map[string]int{"entries": 700, "entries_varied": 150, "annotations": 550}
	for _, c := range data.Cases {
		if least[c.Name] == 0 || c.Protocol < 4 {
			continue
		}
		b, _ := hex.DecodeString(c.Hex)
		s := &wholeTreeSink{treeSink: newTreeSink()}
		d := NewDecoder(bytes.NewReader(b), s, DefaultLimits)
		whole, err := d.Decode()
		if err != nil {
			t.Fatalf("%s/p%d: %v", c.Name, c.Protocol, err)
		}
		if d.ent.read < least[c.Name] {
			t.Errorf("%s/p%d: %d dicts read by entry, want at least %d", c.Name, c.Protocol, d.ent.read, least[c.Name])
		}
		g := newTreeSink()
		generic, err := NewDecoder(bytes.NewReader(b), g, DefaultLimits).Decode()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.plain(whole), g.plain(generic)) {
			t.Errorf("%s/p%d: entry's result differs from the generic path's", c.Name, c.Protocol)
		}
	}
}

// A template names keys by their memo ids: a BINPUT that stores another
// value under one of them (which CPython's pickler never writes) is run by
// step, and entry learns the keys anew after it.
func TestEntryAfterMemoRewrite(t *testing.T) {
	after := ""
	want := `[{"dict":[[{"str":"a"},{"int":"1"}],[{"str":"b"},{"int":"2"}]]},` +
		`{"dict":[[{"str":"a"},{"int":"3"}],[{"str":"b"},{"int":"4"}]]},` +
		`{"dict":[[{"str":"a"},{"int":"5"}],[{"str":"b"},{"int":"6"}]]}`
	for i := 7; i < 17; i += 2 {
		after += fmt.Sprintf("7d9428"+"6802"+"4b%02x"+"6803"+"4b%02x"+"75", i, i+1) // {'c': i, 'b': i+1}
		want += fmt.Sprintf(`,{"dict":[[{"str":"c"},{"int":"%d"}],[{"str":"b"},{"int":"%d"}]]}`, i, i+1)
	}
	want += "]"
	raw, _ := hex.DecodeString("" +
		"8004" + "5d94" + "28" + // EMPTY_LIST MEMOIZE(0) MARK
		"7d9428" + "8c016194" + "4b01" + "8c016294" + "4b02" + "75" + // {'a': 1, 'b': 2}: dict 1, 'a' 2, 'b' 3
		"7d9428" + "6802" + "4b03" + "6803" + "4b04" + "75" + // {'a': 3, 'b': 4}, learned
		"7d9428" + "6802" + "4b05" + "6803" + "4b06" + "75" + // {'a': 5, 'b': 6}, left to fast(): a string follows
		"8c0163" + "7102" + "30" + // 'c' BINPUT 2, POP: memo 2 is now 'c'
		after + "65" + "2e") // APPENDS STOP
	s := &wholeTreeSink{treeSink: newTreeSink()}
	d := NewDecoder(bytes.NewReader(raw), s, DefaultLimits)
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s.plain(v)); string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The second dict, learned, and the first three after the rewrite,
	// learned anew and by template (the rest are in the last 16 bytes,
	// which fast() leaves to step).
	if d.ent.read < 4 {
		t.Errorf("%d dicts read by entry, want at least 4", d.ent.read)
	}
}

// recordTreeSink builds the dicts of every template by Record, as List and
// Dict would, and counts them. With reuse, its lists' values may stand for
// lists of the same items (kept counts the dicts given one so).
type recordTreeSink struct {
	*wholeTreeSink
	compiled, recorded int
	reuse              bool
	kept               int
	tmpls              [][]Value // each template's keys
	interned           map[string]Value
	strings            int // String's calls
}

func (s *recordTreeSink) Reusable(Value) bool { return s.reuse }

// String interns, as a RecordSink's must, and counts its calls.
func (s *recordTreeSink) String(b []byte, isBytes bool) (Value, error) {
	s.strings++
	if v, ok := s.interned[string(b)]; ok && !isBytes {
		return v, nil
	}
	v, err := s.wholeTreeSink.String(b, isBytes)
	if err == nil && !isBytes {
		if s.interned == nil {
			s.interned = map[string]Value{}
		}
		s.interned[string(b)] = v
	}
	return v, err
}

func (s *recordTreeSink) Compile(keys []Value) (int, bool) {
	s.compiled++
	s.tmpls = append(s.tmpls, slices.Clone(keys))
	return len(s.tmpls) - 1, true
}

func (s *recordTreeSink) Record(tmpl int, kv []Value, list int, items []Value) (lv, v Value, err error) {
	keys := s.tmpls[tmpl]
	if 2*len(keys) != len(kv) {
		return lv, v, fmt.Errorf("template %d of %d keys for %d keys and values", tmpl, len(keys), len(kv))
	}
	for k, key := range keys {
		kv[2*k] = key // Record is given the values alone
	}
	s.recorded++
	if list < 0 && s.reuse {
		s.kept++
	}
	if list >= 0 {
		if lv, err = s.List(items); err != nil {
			return lv, v, err
		}
		kv[list] = lv
	}
	v, err = s.Dict(kv)
	return lv, v, err
}

// keptListHead opens a list and writes its first dict anew: {'a': 1, 'f':
// ['x']}, memo ids dict 1, 'a' 2, 'f' 3, list 4, 'x' 5 (hex).
const keptListHead = "8004" + "5d94" + "28" + // EMPTY_LIST MEMOIZE(0) MARK
	"7d9428" + "8c016194" + "4b01" + "8c016694" + "5d9428" + "8c017894" + "65" + "75"

// keptListEntry is {'a': i, 'f': [items]}, its keys memo reads (hex).
func keptListEntry(i int, items string) string {
	return fmt.Sprintf("7d9428"+"6802"+"4b%02x"+"6803"+"5d9428"+"%s"+"65"+"75", i, items)
}

// decodeKeeping decodes the hex pickle in with a sink that lets lists be
// kept and by the generic path, fails t unless both give the same, and
// returns the sink and the generic path's result as JSON.
func decodeKeeping(t *testing.T, in string) (*recordTreeSink, []byte) {
	t.Helper()
	raw, err := hex.DecodeString(in)
	if err != nil {
		t.Fatal(err)
	}
	g := newTreeSink()
	generic, err := NewDecoder(bytes.NewReader(raw), g, DefaultLimits).Decode()
	if err != nil {
		t.Fatal(err)
	}
	s := &recordTreeSink{wholeTreeSink: &wholeTreeSink{treeSink: newTreeSink()}, reuse: true}
	v, err := NewDecoder(bytes.NewReader(raw), s, DefaultLimits).Decode()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s.plain(v))
	want, _ := json.Marshal(g.plain(generic))
	if !bytes.Equal(got, want) {
		t.Errorf("got  %.300s\nwant %.300s", got, want)
	}
	return s, want
}

// A kept frames list names its items by memo ids, as a template names its
// keys: after a BINPUT stores another value under one of them, an entry
// whose list has the same bytes gets the new value, not the kept list.
func TestKeptListAfterMemoRewrite(t *testing.T) {
	in := keptListHead
	for i := 2; i < 6; i++ {
		in += keptListEntry(i, "6805") // memo 5
	}
	in += "8c0179" + "7105" + "30" // 'y' BINPUT 5, POP: memo 5 is now 'y'
	for i := 6; i < 14; i++ {
		in += keptListEntry(i, "6805")
	}
	s, want := decodeKeeping(t, in+"65"+"2e") // APPENDS STOP
	if !bytes.Contains(want, []byte(`"y"`)) {
		t.Fatalf("the generic path read no rewritten entry: %s", want)
	}
	// Before the rewrite and after it, a list is kept and then given.
	if s.kept < 2 {
		t.Errorf("%d dicts given a kept list, want at least 2", s.kept)
	}
}

// A frames list longer than maxKeptList is read every time, never kept:
// what entry keeps stays bounded whatever a file's lists.
func TestLongListNotKept(t *testing.T) {
	for _, n := range []int{maxKeptList / 2 / 5, maxKeptList/5 + 1} { // LONG_BINGETs of 5 bytes
		in := keptListHead
		for i := 2; i < 12; i++ {
			in += keptListEntry(i, strings.Repeat("6a05000000", n)) // memo 5, n times
		}
		s, _ := decodeKeeping(t, in+"65"+"2e")
		if long := 5*n > maxKeptList; long && s.kept > 0 || !long && s.kept == 0 {
			t.Errorf("lists of %d bytes: %d dicts given a kept list", 5*n, s.kept)
		}
	}
}

// A short string an entry read at a place of its template stands for the
// next entry's string there while their bytes are the same, its length
// too, and only then: strings that differ in a byte, in length, past 8
// bytes or in the 8th give the generic path's values.
func TestKeptStrings(t *testing.T) {
	// {'a': 1, 's': 'N/A'}: list 0, dict 1, 'a' 2, 's' 3, 'N/A' 4 (hex).
	in := "8004" + "5d94" + "28" + "7d9428" + "8c016194" + "4b01" + "8c017394" + "8c034e2f4194" + "75"
	// Learned from the first of these, read by template from the second;
	// repeats at 4, 8 and 13; the last two in the 16 bytes fast() leaves
	// to step.
	strs := []string{"N/A", "N/A", "N/B", "", "", "N/A\x00", "N/A", "abcdefgh", "abcdefgh",
		"abcdefghi", "abcdefghi", "abcdefgi", "N/A", "N/A", "x", "y"}
	for i, str := range strs {
		in += fmt.Sprintf("7d9428"+"6802"+"4b%02x"+"6803"+"8c%02x%x94"+"75", i+2, len(str), str)
	}
	s, want := decodeKeeping(t, in+"65"+"2e") // APPENDS STOP
	if !bytes.Contains(want, []byte(`"N/B"`)) || !bytes.Contains(want, []byte(`"abcdefgi"`)) {
		t.Fatalf("the generic path read other strings: %s", want)
	}
	// The first dict's three strings and each entry's but the 3 repeats.
	if want := 3 + len(strs) - 3; s.strings != want {
		t.Errorf("String called %d times, want %d", s.strings, want)
	}
}
