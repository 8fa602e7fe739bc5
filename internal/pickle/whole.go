package pickle

// Containers that arrive whole.
//
// Almost every container in a memory snapshot is written in one piece:
// EMPTY_DICT, MEMOIZE, MARK, its keys and values, SETITEMS (a trace entry),
// or the same with EMPTY_LIST and APPENDS (a stack's frames). The generic
// path opens a handle for each, tracks its references, resolves it when the
// parent consumes it and closes it then: about 2,500 instructions per trace
// entry. fast() instead keeps such a container pending (no handle, a
// placeholder in its memo slot) and, when its one batch is followed by an
// opcode that consumes it or starts a sibling, hands the items to the
// sink's Dict or List at once.
//
// Anything else (a second batch, a reference to a container still being
// built, an opcode fast() does not run) materializes the pending containers
// into open handles first, exactly as EMPTY_DICT/EMPTY_LIST in step would
// have made them, so the generic opcodes never see a pending value. The
// generic path closes a container by the same rule (Decoder.add), so both
// close containers in the same order.
//
// The one difference from pickle.loads: a pickle that adds to a container
// through the memo after it was completed (Python's pickler never writes
// one) fails on both paths with "adding to a value that is not a dict or
// list" instead of decoding.

// WholeSink is a Sink that can build a container from all of its items at
// once. Dict(kv) must return what Open, SetItems(kv) and Close would; List
// likewise with Append. A Sink without these methods gets the generic path.
type WholeSink interface {
	Sink
	Dict(kv []Value) (Value, error)
	List(items []Value) (Value, error)
}

// kindPending marks a pending container on the stack; N indexes
// Decoder.pending. It exists only inside fast().
const kindPending Kind = KindUser - 1

// noMemo is pending.memo for a container that was not memoized.
const noMemo = ^uint64(0)

// pending is a container fast() is building whole.
type pending struct {
	at   int    // its stack slot
	memo uint64 // the memo id holding its placeholder, or noMemo
	list bool
}

// consumed reports whether the opcodes of b from p to end, which follow
// a container's SETITEMS (or a list's APPENDS), prove that the container
// receives nothing more from the stack: after any memo stores (which name
// it without changing it) and FRAME headers, the next opcode takes it off
// the stack or, for a dict, starts the next value (a dict or list cannot
// be a key).
// It reads afterContainer, not a switch: the compiler's search over the
// switch's opcodes was most of its instructions, and every entry asks.
func consumed(b []byte, p, end int, list bool) bool {
	b = b[:end]
	for uint(p) < uint(len(b)) {
		n := int(afterContainer[b[p]])
		if n <= 0 {
			return n == takes || n == takesUnlessList && !list
		}
		p += n
	}
	return false
}

// afterContainer is, for each opcode, consumed's answer: the length of
// an opcode to step over (a memo store, a FRAME header), or one of these.
var afterContainer = func() (t [256]int8) {
	for _, op := range []byte{opAppends, opAppend, opSetItems, opSetItem, opStop, opTuple, opTuple1, opTuple2, opTuple3} {
		t[op] = takes
	}
	// A list could still get a new container through APPEND.
	t[opEmptyDict], t[opEmptyList] = takesUnlessList, takesUnlessList
	t[opMemoize], t[opBinPut], t[opLongBinPut], t[opFrame] = 1, 2, 5, 9
	return t
}()

// consumed's answers in afterContainer, besides a length: 0 is no.
const (
	takes           = -1 // the opcode takes the container off the stack
	takesUnlessList = -2 // it starts a new container, which only a list could still receive
)

// complete builds the pending container below the innermost MARK from the
// values above it and replaces it on the stack with the sink's value.
//
// The items hold no Ref: a container is pending only while fast() has run
// every opcode since its EMPTY_DICT or EMPTY_LIST (an exit materializes
// it), and fast() pushes no Ref.
func (d *Decoder) complete(stack []Value, list bool) ([]Value, error) {
	base := d.marks[len(d.marks)-1]
	t := int(stack[base-1].N)
	items := stack[base:]
	// Pending containers among the items were never filled: empty ones,
	// such as the frames of an entry without a Python stack.
	for i := len(d.pending) - 1; i > t; i-- {
		v, err := d.build(d.pending[i], nil)
		if err != nil {
			return stack, err
		}
		stack[d.pending[i].at] = v
	}
	v, err := d.build(d.pending[t], items)
	if err != nil {
		return stack, err
	}
	d.pending = d.pending[:t]
	d.marks = d.marks[:len(d.marks)-1]
	stack = stack[:base]
	stack[base-1] = v
	return stack, nil
}

// build has the sink make p from items and stores the result in p's memo
// slot.
func (d *Decoder) build(p pending, items []Value) (Value, error) {
	var v Value
	var err error
	if p.list {
		v, err = d.whole.List(items)
	} else {
		v, err = d.whole.Dict(items)
	}
	if err != nil {
		return Value{}, err
	}
	if p.memo == noMemo {
		return v, nil
	}
	return v, d.memo.store(p.memo, v)
}

// materialize opens a handle for every pending container, in stack order,
// and points its stack slot and memo slot at it.
func (d *Decoder) materialize() error {
	for _, p := range d.pending {
		c := Dict
		if p.list {
			c = List
		}
		h, err := d.newHandle(c)
		if err != nil {
			return err
		}
		ref := Value{Kind: KindRef, N: uint64(h)}
		d.stack[p.at] = ref
		d.handles[h].refs = 1
		if p.memo != noMemo {
			if err := d.memo.put(p.memo, ref); err != nil {
				return err
			}
			d.handles[h].memo = append(d.handles[h].memo, p.memo)
		}
	}
	d.pending = d.pending[:0]
	return nil
}
