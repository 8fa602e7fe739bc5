package pickle

import (
	"fmt"
	"sync/atomic"

	"github.com/vramscope/vramscope/internal/units"
)

// Budget bounds the memory a decoder and its sink may hold by the input
// they have read so far: Base bytes, plus PerByte for every byte read. A
// decoder counts what it reads, not what the input claims, so the bound
// holds for a stream of unknown length, such as a decompressed one, and a
// hostile file costs in proportion to its real size.
//
// What the VM holds is checked as it grows: the stack, open containers,
// memo entries and the strings step decodes, with what a Keeper sink says
// it keeps; and once per window of input, for what fast() built. Short
// strings fast() decodes are not charged: each costs the input its own
// bytes, and PerByte is more than one. A zero PerByte turns the budget off.
type Budget struct {
	Base    int64
	PerByte int64
}

// DefaultBudget holds PyTorch snapshots with room to spare: what it
// charges for one comes to 0.3-0.4 bytes per byte of a file of megabytes
// (the 26 MB GPU-made bench seed: 8.1 MiB; the process holds 0.52 of the
// file in all), while a hostile 2 MB file stops at 12 MiB. The process's
// peak RSS stays within 4 times the budget (the garbage collector's
// headroom and the copies a growing slice leaves): TestHostileMemory in
// snapshot.
var DefaultBudget = Budget{Base: 8 << 20, PerByte: 2}

// A Keeper is a Sink that says how many bytes it keeps of what it was
// given (containers it does not turn into records of its own, say), so
// that the budget bounds those too.
type Keeper interface {
	Sink
	Kept() int64
}

// What the budget charges for what it does not measure from a size.
const (
	valueBytes = 16 // a Value, on the stack or kept by the sink
	// handleBytes is a handle and the sink's open container: snapshot's
	// builder keeps the fields of a dict in one (about 600 bytes).
	handleBytes  = 1024
	pendingBytes = 24 // one pending container (whole.go)
)

// BudgetError is a decode stopped because what the decoder holds outgrew
// its budget for the bytes read. The decoder wraps it in an Error with the
// offset and opcode.
type BudgetError struct {
	What   string // what grew past the budget: "open containers", "the stack"...
	Held   int64  // bytes it would hold, as charged
	Read   int64  // bytes of input read
	Budget Budget
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s outgrew the memory budget: %v needed after %v of input, over the %v + %d bytes per input byte that a snapshot may use",
		e.What, units.Bytes(e.Held), units.Bytes(e.Read), units.Bytes(e.Budget.Base), e.Budget.PerByte)
}

// charge adds n bytes that the sink will keep and checks the budget.
func (d *Decoder) charge(n int, what string) error {
	d.held += int64(n)
	return d.check(what, 0)
}

// check returns a BudgetError naming what if the decoder, with grow more
// bytes, would hold more than its budget allows for the bytes read so far.
func (d *Decoder) check(what string, grow int64) error {
	if held, read, ok := d.fits(grow); !ok {
		if what == "" {
			what = d.largest()
		}
		return &BudgetError{What: what, Held: held, Read: read, Budget: d.lim.Budget}
	}
	return nil
}

// fits reports whether the decoder, with grow more bytes, holds no more
// than its budget allows, what it would hold and the bytes read the
// budget counts: with a shared budget, what all its decoders hold, and the
// furthest any of them read.
func (d *Decoder) fits(grow int64) (held, read int64, ok bool) {
	b := d.lim.Budget
	if b.PerByte == 0 {
		return 0, 0, true
	}
	own := d.held + valueBytes*int64(cap(d.stack)) + handleBytes*int64(len(d.handles)) +
		pendingBytes*int64(cap(d.pending)) + d.memo.bytes()
	if d.keeper != nil {
		own += d.keeper.Kept()
	}
	held, read = own+grow, d.Offset()
	if s := d.shared; s != nil {
		held, read = s.report(d, own)+grow, max(read, s.reached(read))
	}
	return held, read, held <= b.Base+b.PerByte*read
}

// A SharedBudget is the one budget of the decoders of one stream decoded
// in parts (a split decode: the walk and its tails): what they hold
// together is checked against the budget for the furthest any of them
// has read, so n parts hold no more than one decoder would have by then.
// Each reports what it holds in steps of reportStep bytes, the furthest
// offset in steps of as many: the sum lags by that much per decoder at
// most, and the decoders seldom write the figures they all read.
type SharedBudget struct {
	held atomic.Int64
	read atomic.Int64
}

const reportStep = 64 << 10

// report records that d holds own bytes and returns what its decoders
// hold together, with d's own figure exact.
func (s *SharedBudget) report(d *Decoder, own int64) int64 {
	if diff := own - d.reported; diff >= reportStep || diff <= -reportStep {
		s.held.Add(diff)
		d.reported = own
	}
	return s.held.Load() - d.reported + own
}

// reached records that a decoder has read up to off and returns the
// furthest any has read.
func (s *SharedBudget) reached(off int64) int64 {
	r := s.read.Load()
	for off-r >= reportStep && !s.read.CompareAndSwap(r, off) {
		r = s.read.Load()
	}
	return max(r, s.read.Load())
}

// ShareBudget makes d one of the decoders that s bounds; decoders it forks
// are too.
func (d *Decoder) ShareBudget(s *SharedBudget) { d.shared = s }

// LeaveBudget withdraws what d reported to its shared budget: it holds
// nothing more (a tail spliced into the head, or dropped).
func (d *Decoder) LeaveBudget() {
	if d.shared != nil {
		d.shared.held.Add(-d.reported)
		d.reported = 0
	}
}

// largest names what holds the most, for a check that is not made where
// one thing grows.
func (d *Decoder) largest() string {
	what, most := "the stack", valueBytes*int64(cap(d.stack))
	for _, c := range []struct {
		what string
		n    int64
	}{
		{"open containers", handleBytes * int64(len(d.handles))},
		{"the memo", d.memo.bytes()},
		{"strings", d.held},
	} {
		if c.n > most {
			what, most = c.what, c.n
		}
	}
	if d.keeper != nil && d.keeper.Kept() > most {
		what = "containers"
	}
	return what
}

// stackRoom is how many values fast() may push: up to the stack's limit
// and twice its capacity, or only into its present capacity if growing it
// would break the budget; step's push then says so. Below
// smallStack values no growth can break it, and fast() stops there before
// the check is made: real snapshots never get there (< 10,000 values), so
// fast() pays no check for them.
func (d *Decoder) stackRoom() int {
	room := d.lim.MaxStack - len(d.stack)
	if len(d.stack) < smallStack {
		return min(room, smallStack-len(d.stack))
	}
	grow := cap(d.stack) // to twice its capacity, at most, before the next check
	if _, _, ok := d.fits(valueBytes * int64(grow)); !ok {
		grow = 0
	}
	return min(room, cap(d.stack)+grow-len(d.stack))
}

// smallStack is a stack size whose growth fits any budget's Base: 1 MiB.
const smallStack = 1 << 16
