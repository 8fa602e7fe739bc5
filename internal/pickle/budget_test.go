package pickle

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The budget stops a stream at the opcode whose growth would break it,
// names what grew and leaves the decoder's other limits to inputs it
// allows; without a budget the stack's own limit still holds.
func TestBudget(t *testing.T) {
	lists := append([]byte("\x80\x04"), bytes.Repeat([]byte("]"), 100_000)...)
	ints := append([]byte("\x80\x04"), bytes.Repeat([]byte("K\x01"), 100_000)...)
	small := Budget{Base: 1 << 20, PerByte: 2}
	cases := []struct {
		name string
		in   []byte
		lim  Limits
		what string // BudgetError.What, or "" for another error
		want string // in the error
	}{
		{"containers", lists, Limits{MaxStack: 1 << 22, MaxMarks: 16, MaxString: 1 << 20, Budget: small}, "open containers",
			"offset 1007: opcode EMPTY_LIST (0x5d): open containers outgrew the memory budget: 1.00 MiB needed after 1008 B of input"},
		{"stack", ints, Limits{MaxStack: 1 << 22, MaxMarks: 16, MaxString: 1 << 20, Budget: small}, "the stack",
			"opcode BININT1 (0x4b): the stack outgrew the memory budget"},
		{"stack limit, no budget", ints, Limits{MaxStack: 1000, MaxMarks: 16, MaxString: 1 << 20}, "",
			"offset 2002: opcode BININT1 (0x4b): stack overflow: more than 1000 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewDecoder(bytes.NewReader(c.in), newTreeSink(), c.lim).Decode()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			var be *BudgetError
			if errors.As(err, &be) != (c.what != "") || be != nil && be.What != c.what {
				t.Errorf("budget error %+v, want what %q", be, c.what)
			}
		})
	}
}
