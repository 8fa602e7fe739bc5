// Package pickle is a restricted, streaming pickle virtual machine.
//
// It runs the opcodes of protocols 0-5 that describe plain data (dicts,
// lists, tuples, strings, bytes, ints, floats, bools, None) and refuses every
// opcode that would import or call anything (GLOBAL, STACK_GLOBAL, REDUCE,
// BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*, out-of-band buffers) with an error
// that names the opcode and its byte offset. Nothing in the input is ever
// executed.
//
// The VM does not build a value tree. Containers are handed to a Sink as
// they are filled, and closed (finalized) when their parent consumes them;
// the Sink decides what a container becomes. This is what lets a
// multi-gigabyte memory snapshot decode into typed records at a fraction of
// its size (see shared/research/pickle-bench.md: generic Go trees need 11-15x
// the file size).
package pickle

import "fmt"

// Kind says what a Value holds.
type Kind uint8

const (
	KindNone   Kind = iota
	KindBool        // N is 0 or 1
	KindInt         // N is an int64's bits
	KindUint        // N is a uint64 >= 2^63 (a 9-byte LONG1 such as 2^64-1)
	KindFloat       // N is a float64's bits
	KindString      // N is whatever Sink.String chose (an interned id)
	KindBytes       // N is whatever Sink.String chose
	KindRef         // N is a Handle of a container the Sink is building
	// KindForeign is a memo entry of the head of a split stream that the
	// part decoding the tail cannot know (a container): N is its memo id,
	// which the head's memo resolves once both are done (split.go).
	KindForeign

	// KindUser is the first kind a Sink may use for its own closed values.
	// The VM stores them and hands them back, never looking inside.
	KindUser Kind = 16
)

// Value is one pickle stack value. It is 16 bytes and never points into the
// heap, so stacks and memos of millions of them cost the GC nothing.
type Value struct {
	N    uint64
	Kind Kind
}

// Int returns v as an int64 if it is an int that fits.
func (v Value) Int() (int64, bool) {
	if v.Kind == KindInt {
		return int64(v.N), true
	}
	if v.Kind == KindBool {
		return int64(v.N), true
	}
	return 0, false
}

// Uint returns v as a uint64 if it is a non-negative int.
func (v Value) Uint() (uint64, bool) {
	switch v.Kind {
	case KindInt:
		if int64(v.N) >= 0 {
			return v.N, true
		}
	case KindUint:
		return v.N, true
	}
	return 0, false
}

// Handle names a container while it is open.
type Handle uint32

// Container is the type of an open container.
type Container uint8

const (
	Dict Container = iota
	List
)

// A Sink builds the containers the VM decodes. Values passed to SetItems,
// Append and Tuple are resolved: they are never KindRef.
type Sink interface {
	// String returns the value for a decoded str (or bytes, if bytes is set).
	// b is only valid during the call.
	String(b []byte, bytes bool) (Value, error)
	// Open starts container h. h may be a handle of a container closed
	// earlier: handles are recycled.
	Open(h Handle, c Container) error
	// SetItems adds alternating keys and values to dict h.
	SetItems(h Handle, kv []Value) error
	// Append adds items to list h.
	Append(h Handle, items []Value) error
	// Close finalizes h. The returned value replaces every reference to h,
	// in the memo and on the stack.
	Close(h Handle) (Value, error)
	// Tuple builds a tuple of items.
	Tuple(items []Value) (Value, error)
}

// Error is a decoding error at a byte offset of the pickle stream.
type Error struct {
	Offset int64 // offset of the opcode that failed
	Op     byte
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("pickle: offset %d: opcode %s: %v", e.Offset, opName(e.Op), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
