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

// The decoders of a split decode share one budget: what they hold
// together must fit what one decoder may hold for the furthest any of
// them has read, where each alone would fit its own.
func TestSharedBudget(t *testing.T) {
	raw, marks := batchedList(100_000)
	lim := DefaultLimits
	lim.Budget = Budget{Base: 8 << 20, PerByte: 2}
	var s SharedBudget
	a := NewDecoder(bytes.NewReader(raw), newTreeSink(), lim)
	b := NewDecoder(bytes.NewReader(raw), newTreeSink(), lim)
	a.ShareBudget(&s)
	b.ShareBudget(&s)
	if _, err := a.DecodeTo(marks[50]); err != nil {
		t.Fatal(err)
	}
	a.held, b.held = 5<<20, 5<<20
	if err := a.check("strings", 0); err != nil {
		t.Fatalf("one decoder holding 5 MiB: %v", err)
	}
	var be *BudgetError
	if err := b.check("strings", 0); !errors.As(err, &be) {
		t.Fatalf("two decoders holding 5 MiB each: %v, want a BudgetError", err)
	}
	if be.Held < 10<<20 || be.Read < reportStep || be.Read > a.Offset() {
		t.Errorf("the shared check counted %d bytes held after %d read, want 10 MiB and more after a's %d", be.Held, be.Read, a.Offset())
	}
	a.LeaveBudget()
	a.held = 0
	if err := b.check("strings", 0); err != nil {
		t.Errorf("after the other decoder left the budget: %v", err)
	}
	// Unshared, each decoder has a budget of its own.
	c := NewDecoder(bytes.NewReader(raw), newTreeSink(), lim)
	c.held = 5 << 20
	if err := c.check("strings", 0); err != nil {
		t.Errorf("an unshared decoder holding 5 MiB: %v", err)
	}
}
