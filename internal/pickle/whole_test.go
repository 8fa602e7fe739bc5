package pickle

import "testing"

// consumed answers for the opcodes after a container's SETITEMS or APPENDS:
// each row is the bytes after it, read to their end or to end.
func TestConsumed(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		end  int // -1: len(b)
		list bool
		want bool
	}{
		{"next entry's dict", []byte{opEmptyDict, opMemoize}, -1, false, true},
		{"a list's next list", []byte{opEmptyList}, -1, true, false},
		{"a dict's next list", []byte{opEmptyList}, -1, false, true},
		{"appends after stores", []byte{opMemoize, opBinPut, 7, opLongBinPut, 1, 2, 3, 4, opAppends}, -1, true, true},
		{"setitems after a frame", []byte{opFrame, 1, 0, 0, 0, 0, 0, 0, 0, opSetItems}, -1, false, true},
		{"stop", []byte{opStop}, -1, false, true},
		{"tuple", []byte{opMemoize, opTuple2}, -1, true, true},
		{"a string may go to the container", []byte{opShortBinUnicode, 1, 'a'}, -1, false, false},
		{"a memo read may too", []byte{opBinGet, 1}, -1, true, false},
		{"nothing left", nil, -1, false, false},
		{"only stores left", []byte{opMemoize, opBinPut, 3}, -1, false, false},
		{"a store cut at end", []byte{opLongBinPut, 1, 2, opAppends}, 3, true, false},
		{"the answer past end", []byte{opMemoize, opAppends}, 1, true, false},
		{"a frame's length runs past the bytes", []byte{opFrame, 1, 0}, -1, false, false},
	}
	for _, c := range cases {
		end := c.end
		if end < 0 {
			end = len(c.b)
		}
		// From 0 and from 2, after bytes that are not the question's.
		if got := consumed(c.b, 0, end, c.list); got != c.want {
			t.Errorf("%s: consumed = %v, want %v", c.name, got, c.want)
		}
		pad := append([]byte{opBinGet, 9}, c.b...)
		if got := consumed(pad, 2, end+2, c.list); got != c.want {
			t.Errorf("%s, from 2: consumed = %v, want %v", c.name, got, c.want)
		}
	}
}
