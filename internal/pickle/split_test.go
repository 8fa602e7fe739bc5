package pickle

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// batchedList is what CPython's pickler writes (protocol 4) for a list of
// n ints: MARK, up to 1,000 items, APPENDS, and so on. It returns the
// pickle and the offsets of the batches' MARKs.
func batchedList(n int) ([]byte, []int64) {
	b := []byte{opProto, 4, opEmptyList, opMemoize}
	var marks []int64
	for i := 0; i < n; i += 1000 {
		marks = append(marks, int64(len(b)))
		b = append(b, opMark)
		for j := i; j < min(n, i+1000); j++ {
			b = append(b, opBinInt2, byte(j), byte(j>>8))
		}
		b = append(b, opAppends)
	}
	return append(b, opStop), marks
}

func TestDecodeTo(t *testing.T) {
	raw, marks := batchedList(2500)
	want, err := decodeTree(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off     int64
		reached bool
	}{
		{marks[1], true},      // an opcode boundary
		{marks[1] + 2, false}, // inside BININT2's argument: stops at the next opcode
		{0, true},
	} {
		s := newTreeSink()
		d := NewDecoder(bytes.NewReader(raw), s, DefaultLimits)
		reached, err := d.DecodeTo(tc.off)
		if err != nil || reached != tc.reached || d.Offset() < tc.off {
			t.Errorf("DecodeTo(%d) = %v, %v at %d; want %v", tc.off, reached, err, d.Offset(), tc.reached)
		}
		v, err := d.Decode()
		if err != nil || !reflect.DeepEqual(s.plain(v), want) {
			t.Errorf("after DecodeTo(%d), Decode gave %v, %v", tc.off, err, v)
		}
	}
}

// at is the SplitPoint that is always off.
func at(off int64) SplitPoint { return func(int64) int64 { return off } }

// A tail starts at the first batch at or after its offset, decodes the
// batches into a list of its own and ends where the list does.
func TestScanTail(t *testing.T) {
	raw, marks := batchedList(2500)
	s := newTreeSink()
	d, err := ScanTail(bytes.NewReader(raw), s, DefaultLimits, at(marks[0]+1))
	if err != nil {
		t.Fatal(err)
	}
	if d.TailStart() != marks[1] {
		t.Fatalf("tail starts at %d, want the second batch at %d", d.TailStart(), marks[1])
	}
	h, end, err := d.DecodeTail()
	if err != nil {
		t.Fatal(err)
	}
	if end != int64(len(raw)-1) {
		t.Errorf("tail ends at %d, want the STOP at %d", end, len(raw)-1)
	}
	items := s.open[h].items
	first, last := map[string]any{"int": "1000"}, map[string]any{"int": "2499"}
	if len(items) != 1500 || !reflect.DeepEqual(items[0], first) || !reflect.DeepEqual(items[1499], last) {
		t.Errorf("tail got %d items (%v ... %v), want 1000 ... 2499", len(items), items[0], items[len(items)-1])
	}

	for name, raw := range map[string][]byte{
		"after the last batch": raw,
		"protocol 0":           []byte("(lp0\nI1\naI2\na."),
	} {
		from := marks[2] + 1
		if name == "protocol 0" {
			from = 0
		}
		if _, err := ScanTail(bytes.NewReader(raw), newTreeSink(), DefaultLimits, at(from)); !errors.Is(err, ErrNoSplit) {
			t.Errorf("%s: ScanTail gave %v, want ErrNoSplit", name, err)
		}
	}
}
