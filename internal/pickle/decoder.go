package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits bound what a hostile input can make the VM hold.
type Limits struct {
	MaxStack  int   // values on the stack (real snapshots: < 10,000)
	MaxMarks  int   // open MARKs (real snapshots: 7)
	MaxString int64 // bytes in one str/bytes object
	Budget    Budget
}

// DefaultLimits are generous for PyTorch memory snapshots.
var DefaultLimits = Limits{MaxStack: 1 << 22, MaxMarks: 1 << 16, MaxString: 1 << 30, Budget: DefaultBudget}

// The read buffer starts at minBuf and grows to maxBuf once the input has
// filled it: 256 KiB keeps read calls rare on big files (a thousand for
// 288 MB), and small inputs (fixtures, fuzzing) stay cheap. The whole
// stream is never in memory. Each part of a split decode has one: at 1 MiB
// the 16 parts of the 288 MB bench file held 18.5 MB of buffers at the
// decode's peak, which they took from 146 to 139 MiB live at 256 KiB
// (bench/RESULTS.md).
const (
	minBuf = 64 << 10
	maxBuf = 256 << 10
)

// Decoder runs one pickle stream.
type Decoder struct {
	r io.Reader
	// src is the whole stream of a decoder over bytes (NewDecoderBytes),
	// which buf then windows, and moved is told where each window starts.
	src   []byte
	moved func(base int64)
	buf   []byte
	pos   int
	end   int
	base  int64 // stream offset of buf[0]
	eof   bool

	sink    Sink
	whole   WholeSink  // sink, if it builds whole containers (whole.go)
	keeper  Keeper     // sink, if it says what it keeps (budget.go)
	records RecordSink // sink, if it builds dicts by template (entry.go)
	pending []pending
	lim     Limits
	proto   int
	stack   []Value
	marks   []int
	memo    memo
	handles []handle
	free    []Handle
	long    []byte // scratch for strings longer than the buffer

	held int64 // bytes charged to the budget besides what it measures (budget.go)
	// shared, if not nil, is the budget d shares with the other decoders
	// of its stream, and reported what d last told it it holds.
	shared   *SharedBudget
	reported int64

	ent entryState // entry.go

	stop int64  // DecodeTo's offset, or -1
	top  *Value // the result, once DecodeTo ran into STOP
	part *tail  // set while decoding the tail of a split stream (split.go)
	walk *walk  // set in a decoder that walks a stream for its tails (split.go)
}

// handle is the VM's bookkeeping for one open container.
type handle struct {
	refs   int32 // KindRef values naming it on the stack
	closed bool
	result Value    // valid once closed
	memo   []uint64 // memo ids that hold a Ref to it
}

// NewDecoder returns a decoder reading r and building containers with sink.
func NewDecoder(r io.Reader, sink Sink, lim Limits) *Decoder {
	d := &Decoder{r: r, buf: make([]byte, minBuf), sink: sink, lim: lim, stop: -1}
	d.whole, _ = sink.(WholeSink)
	d.keeper, _ = sink.(Keeper)
	d.records, _ = sink.(RecordSink)
	return d
}

// NewDecoderBytes returns a decoder of the stream src, which it reads in
// place and never writes (a read-only mapping of a file will do), a window
// of maxBuf bytes at a time; moved, if not nil, is called with the offset
// of each new window: src before it will not be read again. Reading a
// mapping instead of copying the file into a buffer saves the copy (0.11 s
// of system time per GB read on a 2-core VM).
func NewDecoderBytes(src []byte, sink Sink, lim Limits, moved func(base int64)) *Decoder {
	d := &Decoder{src: src, moved: moved, sink: sink, lim: lim, stop: -1}
	d.whole, _ = sink.(WholeSink)
	d.keeper, _ = sink.(Keeper)
	d.records, _ = sink.(RecordSink)
	return d
}

// Protocol is the protocol announced by PROTO (0 if there was none).
func (d *Decoder) Protocol() int { return d.proto }

// Offset is the number of stream bytes consumed so far.
func (d *Decoder) Offset() int64 { return d.base + int64(d.pos) }

var (
	errTruncated = errors.New("unexpected end of input (truncated file?)")
	errRefused   = errors.New("refused: it would import or call Python code, which a memory snapshot never needs")
)

// fill compacts the buffer and reads until at least want bytes are
// buffered or the input ends.
func (d *Decoder) fill(want int) error {
	if d.src != nil {
		d.base += int64(d.pos)
		end := min(int64(len(d.src)), d.base+int64(max(want, maxBuf)))
		d.buf, d.pos = d.src[d.base:end], 0
		d.end, d.eof = len(d.buf), end == int64(len(d.src))
		if d.moved != nil {
			d.moved(d.base)
		}
		return nil
	}
	if d.pos > 0 {
		copy(d.buf, d.buf[d.pos:d.end])
		d.base += int64(d.pos)
		d.end -= d.pos
		d.pos = 0
	}
	if len(d.buf) < maxBuf && d.base >= int64(len(d.buf)) { // a big input
		d.buf = append(d.buf, make([]byte, maxBuf-len(d.buf))...)
	}
	want = min(want, len(d.buf))
	for d.end < want && !d.eof {
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		if err == io.EOF {
			d.eof = true
		} else if err != nil {
			return fmt.Errorf("reading input: %w", err)
		}
	}
	return nil
}

// need makes n bytes available at d.pos (n <= len(d.buf)).
func (d *Decoder) need(n int) error {
	if d.end-d.pos >= n {
		return nil
	}
	if err := d.fill(n); err != nil {
		return err
	}
	if d.end-d.pos < n {
		return errTruncated
	}
	return nil
}

// bytes returns the next n bytes. The slice is valid until the next read.
// A length the input cannot back ends in errTruncated after reading at most
// what the input holds, never in an allocation of n.
func (d *Decoder) bytes(n int64) ([]byte, error) {
	if n < 0 || n > d.lim.MaxString {
		return nil, fmt.Errorf("string of %d bytes exceeds the limit of %d", n, d.lim.MaxString)
	}
	if n <= int64(len(d.buf)) {
		if err := d.need(int(n)); err != nil {
			return nil, err
		}
		b := d.buf[d.pos : d.pos+int(n)]
		d.pos += int(n)
		return b, nil
	}
	d.long = d.long[:0]
	for int64(len(d.long)) < n {
		if d.pos == d.end {
			if err := d.fill(1); err != nil {
				return nil, err
			}
			if d.pos == d.end {
				return nil, errTruncated
			}
		}
		k := min(int64(d.end-d.pos), n-int64(len(d.long)))
		d.long = append(d.long, d.buf[d.pos:d.pos+int(k)]...)
		d.pos += int(k)
	}
	return d.long, nil
}

// line returns the bytes up to the next '\n' (protocol 0 text arguments).
func (d *Decoder) line() ([]byte, error) {
	d.long = d.long[:0]
	for {
		if d.pos == d.end {
			if err := d.fill(1); err != nil {
				return nil, err
			}
			if d.pos == d.end {
				return nil, errTruncated
			}
		}
		chunk := d.buf[d.pos:d.end]
		if i := indexByte(chunk, '\n'); i >= 0 {
			d.long = append(d.long, chunk[:i]...)
			d.pos += i + 1
			return d.long, nil
		}
		d.long = append(d.long, chunk...)
		d.pos = d.end
		if int64(len(d.long)) > d.lim.MaxString {
			return nil, fmt.Errorf("text argument longer than %d bytes", d.lim.MaxString)
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func (d *Decoder) push(v Value) error {
	if len(d.stack) >= d.lim.MaxStack {
		return fmt.Errorf("stack overflow: more than %d values", d.lim.MaxStack)
	}
	if len(d.stack) == cap(d.stack) {
		if err := d.check("the stack", valueBytes*int64(max(cap(d.stack), 1024))); err != nil {
			return err
		}
	}
	if v.Kind == KindRef {
		d.handles[v.N].refs++
	}
	d.stack = append(d.stack, v)
	return nil
}

func (d *Decoder) pop() (Value, error) {
	if len(d.stack) == 0 || (len(d.marks) > 0 && len(d.stack) == d.marks[len(d.marks)-1]) {
		return Value{}, errors.New("stack underflow")
	}
	v := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	return v, nil
}

// popMark returns the values above the innermost MARK and removes them and
// the MARK. The slice aliases the stack until the next push.
func (d *Decoder) popMark() ([]Value, error) {
	if len(d.marks) == 0 {
		return nil, errors.New("no MARK on the stack")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, nil
}

func (d *Decoder) open(c Container) error {
	h, err := d.newHandle(c)
	if err != nil {
		return err
	}
	return d.push(Value{Kind: KindRef, N: uint64(h)})
}

// newHandle starts container c in the sink under a free handle.
func (d *Decoder) newHandle(c Container) (Handle, error) {
	var h Handle
	if n := len(d.free); n > 0 {
		h = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		if err := d.check("open containers", handleBytes); err != nil {
			return 0, err
		}
		h = Handle(len(d.handles))
		d.handles = append(d.handles, handle{})
	}
	d.handles[h] = handle{memo: d.handles[h].memo[:0]}
	return h, d.sink.Open(h, c)
}

// resolve turns a value leaving the stack into what its consumer stores:
// a Ref to an open container closes it. target is the container being
// filled, which must not contain itself.
func (d *Decoder) resolve(v Value, target Handle, hasTarget bool) (Value, error) {
	if v.Kind != KindRef {
		return v, nil
	}
	h := Handle(v.N)
	hs := &d.handles[h]
	if !hs.closed {
		if hasTarget && h == target {
			return Value{}, errors.New("a container contains itself (recursive structure)")
		}
		res, err := d.sink.Close(h)
		if err != nil {
			return Value{}, err
		}
		hs = &d.handles[h]
		hs.closed = true
		hs.result = res
		for _, id := range hs.memo {
			if err := d.memo.replace(id, v, res); err != nil {
				return Value{}, err
			}
		}
	}
	res := hs.result
	d.release(h)
	return res, nil
}

// release drops one stack reference to h, recycling it when none is left.
func (d *Decoder) release(h Handle) {
	hs := &d.handles[h]
	hs.refs--
	if hs.refs == 0 && hs.closed {
		d.free = append(d.free, h)
	}
}

// drop discards values removed without being consumed (POP, POP_MARK).
func (d *Decoder) drop(vs ...Value) {
	for _, v := range vs {
		if v.Kind == KindRef {
			hs := &d.handles[v.N]
			hs.refs--
			// An open container nobody holds stays allocated: the memo may
			// still bring it back.
			if hs.refs == 0 && hs.closed {
				d.free = append(d.free, Handle(v.N))
			}
		}
	}
}

func (d *Decoder) resolveAll(items []Value, target Handle, hasTarget bool) error {
	for i, v := range items {
		if v.Kind != KindRef {
			continue
		}
		r, err := d.resolve(v, target, hasTarget)
		if err != nil {
			return err
		}
		items[i] = r
	}
	return nil
}

// add hands items to container h, which sits in stack slot at, and closes
// it at once when the next opcodes prove it complete (consumed, whole.go):
// containers then close in the order their contents end, whether fast()
// built them whole or not, and a list of records stays in arena order.
func (d *Decoder) add(h Handle, at int, dict bool, items []Value) error {
	var err error
	if dict {
		err = d.sink.SetItems(h, items)
	} else {
		err = d.sink.Append(h, items)
	}
	if err == nil {
		err = d.check("container items", 0)
	}
	if err != nil || d.part != nil && h == d.part.list || !consumed(d.buf, d.pos, d.end, !dict) {
		return err // a tail's list stays open: the head's decoder owns it
	}
	v, err := d.resolve(d.stack[at], 0, false)
	if err != nil {
		return err
	}
	d.stack[at] = v
	return nil
}

// targetRef returns the open container below the mark that items go into.
// The error names no opcode: Decode wraps it with the opcode and offset.
func (d *Decoder) targetRef(base int) (Handle, error) {
	if base == 0 {
		return 0, errors.New("no container to add to")
	}
	t := d.stack[base-1]
	if t.Kind != KindRef {
		return 0, errors.New("adding to a value that is not a dict or list")
	}
	h := Handle(t.N)
	if d.handles[h].closed {
		return 0, errors.New("adding to a container that was already used")
	}
	return h, nil
}

func (d *Decoder) memoPut(id uint64) error {
	if len(d.stack) == 0 || (len(d.marks) > 0 && len(d.stack) == d.marks[len(d.marks)-1]) {
		return errors.New("memo store with an empty stack")
	}
	v := d.stack[len(d.stack)-1]
	if err := d.memo.put(id, v); err != nil {
		return err
	}
	if err := d.check("the memo", 0); err != nil {
		return err
	}
	if v.Kind == KindRef {
		hs := &d.handles[v.N]
		hs.memo = append(hs.memo, id)
	}
	return nil
}

func (d *Decoder) memoGet(id uint64) error {
	v, ok := d.memo.get(id)
	if !ok {
		return fmt.Errorf("memo id %d was never stored", id)
	}
	return d.push(v)
}

func (d *Decoder) str(b []byte, isBytes bool) error {
	if err := d.charge(len(b), "strings"); err != nil {
		return err
	}
	v, err := d.sink.String(b, isBytes)
	if err != nil {
		return err
	}
	return d.push(v)
}

// Decode runs the stream to its STOP and returns the top value, resolved.
func (d *Decoder) Decode() (Value, error) {
	if d.top != nil {
		return *d.top, nil
	}
	d.stop = -1
	v, _, err := d.run()
	return v, err
}

// DecodeTo runs the stream up to the first opcode that starts at or after
// off and reports whether that opcode starts exactly at off. Decode or
// DecodeTo go on from there.
func (d *Decoder) DecodeTo(off int64) (bool, error) {
	if d.top != nil {
		return false, nil
	}
	d.stop = off
	v, done, err := d.run()
	d.stop = -1
	if err != nil {
		return false, err
	}
	if done {
		d.top = &v
		return false, nil
	}
	return d.Offset() == off, nil
}

// run decodes until STOP (done), or until d.stop when it is set.
func (d *Decoder) run() (Value, bool, error) {
	for {
		if d.stop >= 0 && d.Offset() >= d.stop {
			return Value{}, false, nil
		}
		if d.end-d.pos < 16 && !d.eof {
			if err := d.fill(len(d.buf)); err != nil {
				return Value{}, false, &Error{Offset: d.Offset(), Err: err}
			}
			// Once a window: what fast() built, which it does not check.
			if err := d.check("", 0); err != nil && d.pos < d.end {
				return Value{}, false, &Error{Offset: d.Offset(), Op: d.buf[d.pos], Err: err}
			}
		}
		if err := d.fast(); err != nil {
			return Value{}, false, err
		}
		if d.end-d.pos < 16 && !d.eof || d.stop >= 0 && d.Offset() >= d.stop {
			continue
		}
		off := d.Offset()
		if d.pos == d.end {
			return Value{}, false, &Error{Offset: off, Err: errTruncated}
		}
		op := d.buf[d.pos]
		d.pos++
		v, done, err := d.step(op)
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return Value{}, false, err
			}
			return Value{}, false, &Error{Offset: off, Op: op, Err: err}
		}
		if done {
			return v, true, nil
		}
		if d.part != nil && len(d.stack) == 1 && len(d.marks) == 0 {
			if end, err := d.tailEnds(); end || err != nil {
				return Value{}, false, err
			}
		}
	}
}

// fast runs the opcodes that make up about 90% of a snapshot (memo reads
// alone are 68%: pickle-bench.md's histogram) in a loop over local copies
// of the buffer, stack and memo, while at least 16 bytes are buffered, so
// no argument needs a bounds-checked refill. It also builds the containers
// that arrive whole (whole.go). It stops at any other opcode and at any
// case that needs care (shared open containers, wide values, growth), which
// step then handles. Measured on a real-derived 20 MB snapshot: this cut
// instructions per opcode by more than half compared with one step() call
// per opcode; building containers whole cut the 26 MB GPU-made seed's
// decode from 1.26 G to 0.93 G instructions (callgrind).
func (d *Decoder) fast() error {
	buf, pos := d.buf, d.pos
	stack := d.stack
	// Every opcode takes at least one byte and pushes at most one value,
	// so stopping within maxStack-len(stack) bytes keeps the stack in its
	// limit without a check per opcode; the last 16 buffered bytes are
	// left for step, so no argument is read past the buffer.
	limit := min(d.end-16, pos+d.stackRoom()-1)
	if d.stop >= 0 {
		limit = min(limit, int(d.stop-d.base)-1)
	}
	m := &d.memo
	mv := m.view()
	d.ent.nkeys, d.ent.misses = 0, 0 // see entry.go
	d.ent.forgetShapes()
	d.ent.gen++
	d.ent.view = mv
	for pos <= limit {
		switch fastClass[buf[pos]] {
		case fcBinGet, fcLongBinGet:
			var id uint64
			n := 2
			if buf[pos] == opBinGet {
				id = uint64(buf[pos+1])
			} else {
				id = uint64(binary.LittleEndian.Uint32(buf[pos+1:]))
				n = 5
			}
			u := m.word(id, mv)
			v, ok := readable(u)
			if !ok {
				goto out
			}
			stack = append(stack, v)
			pos += n
		case fcMemoize:
			top := len(stack) - 1
			if top < 0 || stack[top].Kind == KindRef || stack[top].N > payloadMask ||
				m.sparse != nil || (len(d.marks) > 0 && top < d.marks[len(d.marks)-1]) {
				goto out
			}
			pk, ok := packedKind(stack[top].Kind)
			pend := stack[top].Kind == kindPending
			if pend {
				// The slot holds a Ref-kind placeholder, which reads below
				// leave to step, until the container is built.
				pk, ok = uint32(KindRef), d.pending[stack[top].N].memo == noMemo
			}
			c := m.n >> memoChunkBits
			if !ok || c >= uint64(len(m.chunks)) || len(m.chunks[c]) == cap(m.chunks[c]) {
				goto out
			}
			if pend {
				d.pending[stack[top].N].memo = m.n
			}
			m.chunks[c] = append(m.chunks[c], pk<<payloadBits|uint32(stack[top].N))
			m.n++
			mv.n = m.n
			pos++
		case fcBinInt1:
			stack = append(stack, Value{Kind: KindInt, N: uint64(buf[pos+1])})
			pos += 2
		case fcBinInt2:
			stack = append(stack, Value{Kind: KindInt, N: uint64(binary.LittleEndian.Uint16(buf[pos+1:]))})
			pos += 3
		case fcBinInt:
			v := int32(binary.LittleEndian.Uint32(buf[pos+1:]))
			stack = append(stack, Value{Kind: KindInt, N: uint64(int64(v))})
			pos += 5
		case fcLong1:
			u, ok := long1(buf[pos:])
			if !ok {
				goto out
			}
			stack = append(stack, Value{Kind: KindInt, N: u})
			pos += 2 + int(buf[pos+1])
		case fcShortBinUnicode:
			n := int(buf[pos+1])
			if d.end-pos < 2+n {
				goto out
			}
			v, err := d.sink.String(buf[pos+2:pos+2+n], false)
			if err != nil {
				d.pos, d.stack = pos, stack
				return &Error{Offset: d.Offset(), Op: opShortBinUnicode, Err: err}
			}
			stack = append(stack, v)
			pos += 2 + n
		case fcMark:
			if len(d.marks) >= d.lim.MaxMarks {
				goto out
			}
			d.marks = append(d.marks, len(stack))
			pos++
		case fcEmptyDict, fcEmptyList:
			if buf[pos] == opEmptyDict {
				v, next, ok, err := d.entry(pos, limit)
				if err != nil {
					d.pos, d.stack = pos, stack
					return err
				}
				if ok {
					stack = append(stack, v)
					pos = next
					continue
				}
			}
			if d.whole == nil {
				goto out
			}
			d.pending = append(d.pending, pending{at: len(stack), memo: noMemo, list: buf[pos] == opEmptyList})
			stack = append(stack, Value{Kind: kindPending, N: uint64(len(d.pending) - 1)})
			pos++
		case fcSetItems, fcAppends:
			list := buf[pos] == opAppends
			if len(d.marks) == 0 {
				goto out
			}
			base := d.marks[len(d.marks)-1]
			if base == 0 || stack[base-1].Kind != kindPending || d.pending[stack[base-1].N].list != list ||
				(!list && (len(stack)-base)%2 != 0) || !consumed(buf, pos+1, d.end, list) {
				goto out
			}
			var err error
			if stack, err = d.complete(stack, list); err != nil {
				d.pos, d.stack = pos, stack
				return &Error{Offset: d.Offset(), Op: buf[pos], Err: err}
			}
			pos++
		default:
			goto out
		}
	}
out:
	d.pos, d.stack = pos, stack
	if len(d.pending) > 0 {
		if err := d.materialize(); err != nil {
			e := &Error{Offset: d.Offset(), Err: fmt.Errorf("opening a container: %w", err)}
			if d.pos < d.end {
				e.Op = d.buf[d.pos] // the opcode fast() stopped at
			}
			return e
		}
	}
	return nil
}

// long1 reads the LONG1 at b[0] if its int takes at most 8 bytes (fast()
// keeps 16 bytes buffered past an opcode's start).
func long1(b []byte) (uint64, bool) {
	n := int(b[1])
	if n > 8 {
		return 0, false
	}
	u := binary.LittleEndian.Uint64(b[2:])
	if n < 8 {
		shift := uint(64 - 8*n) // sign-extend the n-byte two's complement
		u = uint64(int64(u<<shift) >> shift)
	}
	return u, true
}

// Classes of the opcodes fast handles. A dense class byte lets the switch
// compile to a jump table instead of a search over sparse opcode values.
const (
	fcNone = iota
	fcBinGet
	fcLongBinGet
	fcMemoize
	fcBinInt1
	fcBinInt2
	fcBinInt
	fcLong1
	fcShortBinUnicode
	fcMark
	fcEmptyDict
	fcEmptyList
	fcSetItems
	fcAppends
)

var fastClass = func() (t [256]uint8) {
	t[opBinGet], t[opLongBinGet], t[opMemoize] = fcBinGet, fcLongBinGet, fcMemoize
	t[opBinInt1], t[opBinInt2], t[opBinInt] = fcBinInt1, fcBinInt2, fcBinInt
	t[opLong1], t[opShortBinUnicode], t[opMark] = fcLong1, fcShortBinUnicode, fcMark
	t[opEmptyDict], t[opEmptyList], t[opSetItems], t[opAppends] = fcEmptyDict, fcEmptyList, fcSetItems, fcAppends
	return t
}()

// step runs one opcode whose byte was just consumed.
func (d *Decoder) step(op byte) (Value, bool, error) {
	switch op {
	case opBinGet:
		if err := d.need(1); err != nil {
			return Value{}, false, err
		}
		id := uint64(d.buf[d.pos])
		d.pos++
		return Value{}, false, d.memoGet(id)
	case opLongBinGet:
		if err := d.need(4); err != nil {
			return Value{}, false, err
		}
		id := uint64(binary.LittleEndian.Uint32(d.buf[d.pos:]))
		d.pos += 4
		return Value{}, false, d.memoGet(id)
	case opMemoize:
		return Value{}, false, d.memoPut(d.memo.len())
	case opBinPut:
		if err := d.need(1); err != nil {
			return Value{}, false, err
		}
		id := uint64(d.buf[d.pos])
		d.pos++
		return Value{}, false, d.memoPut(id)
	case opLongBinPut:
		if err := d.need(4); err != nil {
			return Value{}, false, err
		}
		id := uint64(binary.LittleEndian.Uint32(d.buf[d.pos:]))
		d.pos += 4
		return Value{}, false, d.memoPut(id)
	case opMark:
		if len(d.marks) >= d.lim.MaxMarks {
			return Value{}, false, fmt.Errorf("more than %d nested MARKs", d.lim.MaxMarks)
		}
		d.marks = append(d.marks, len(d.stack))
		return Value{}, false, nil
	case opEmptyDict:
		return Value{}, false, d.open(Dict)
	case opEmptyList:
		return Value{}, false, d.open(List)
	case opSetItems, opAppends:
		base := len(d.stack)
		if len(d.marks) > 0 {
			base = d.marks[len(d.marks)-1]
		} else {
			return Value{}, false, errors.New("no MARK on the stack")
		}
		h, err := d.targetRef(base)
		if err != nil {
			return Value{}, false, err
		}
		items, _ := d.popMark()
		if err := d.resolveAll(items, h, true); err != nil {
			return Value{}, false, err
		}
		if op == opSetItems && len(items)%2 != 0 {
			return Value{}, false, errors.New("SETITEMS with an odd number of values")
		}
		return Value{}, false, d.add(h, base-1, op == opSetItems, items)
	case opSetItem, opAppend:
		n := 1
		if op == opSetItem {
			n = 2
		}
		base := len(d.stack) - n
		if base < 0 || (len(d.marks) > 0 && base < d.marks[len(d.marks)-1]) {
			return Value{}, false, errors.New("stack underflow")
		}
		h, err := d.targetRef(base)
		if err != nil {
			return Value{}, false, err
		}
		var tmp [2]Value
		items := tmp[:n]
		copy(items, d.stack[base:])
		d.stack = d.stack[:base]
		if err := d.resolveAll(items, h, true); err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.add(h, base-1, op == opSetItem, items)
	case opShortBinUnicode, opShortBinString, opShortBinBytes:
		if err := d.need(1); err != nil {
			return Value{}, false, err
		}
		n := int64(d.buf[d.pos])
		d.pos++
		b, err := d.bytes(n)
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.str(b, op == opShortBinBytes)
	case opBinUnicode, opBinString, opBinBytes:
		if err := d.need(4); err != nil {
			return Value{}, false, err
		}
		n := int64(binary.LittleEndian.Uint32(d.buf[d.pos:]))
		if op == opBinString {
			n = int64(int32(n))
		}
		d.pos += 4
		b, err := d.bytes(n)
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.str(b, op == opBinBytes)
	case opBinUnicode8, opBinBytes8:
		if err := d.need(8); err != nil {
			return Value{}, false, err
		}
		u := binary.LittleEndian.Uint64(d.buf[d.pos:])
		d.pos += 8
		if u > math.MaxInt64 {
			return Value{}, false, fmt.Errorf("string length %d is impossible", u)
		}
		b, err := d.bytes(int64(u))
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.str(b, op == opBinBytes8)
	case opBinInt1:
		if err := d.need(1); err != nil {
			return Value{}, false, err
		}
		v := d.buf[d.pos]
		d.pos++
		return Value{}, false, d.push(Value{Kind: KindInt, N: uint64(v)})
	case opBinInt2:
		if err := d.need(2); err != nil {
			return Value{}, false, err
		}
		v := binary.LittleEndian.Uint16(d.buf[d.pos:])
		d.pos += 2
		return Value{}, false, d.push(Value{Kind: KindInt, N: uint64(v)})
	case opBinInt:
		if err := d.need(4); err != nil {
			return Value{}, false, err
		}
		v := int32(binary.LittleEndian.Uint32(d.buf[d.pos:]))
		d.pos += 4
		return Value{}, false, d.push(Value{Kind: KindInt, N: uint64(int64(v))})
	case opLong1, opLong4:
		var n int64
		if op == opLong1 {
			if err := d.need(1); err != nil {
				return Value{}, false, err
			}
			n = int64(d.buf[d.pos])
			d.pos++
		} else {
			if err := d.need(4); err != nil {
				return Value{}, false, err
			}
			n = int64(int32(binary.LittleEndian.Uint32(d.buf[d.pos:])))
			d.pos += 4
			if n < 0 {
				return Value{}, false, fmt.Errorf("negative LONG4 length %d", n)
			}
		}
		if n > 9 {
			// Read (bounded by the input) so the error names a real
			// integer, not a length that may be a lie.
			if _, err := d.bytes(n); err != nil {
				return Value{}, false, err
			}
			return Value{}, false, fmt.Errorf("integer of %d bytes does not fit in 64 bits", n)
		}
		b, err := d.bytes(n)
		if err != nil {
			return Value{}, false, err
		}
		v, err := decodeLong(b)
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.push(v)
	case opBinFloat:
		if err := d.need(8); err != nil {
			return Value{}, false, err
		}
		u := binary.BigEndian.Uint64(d.buf[d.pos:])
		d.pos += 8
		return Value{}, false, d.push(Value{Kind: KindFloat, N: u})
	case opNewTrue:
		return Value{}, false, d.push(Value{Kind: KindBool, N: 1})
	case opNewFalse:
		return Value{}, false, d.push(Value{Kind: KindBool})
	case opNone:
		return Value{}, false, d.push(Value{Kind: KindNone})
	case opTuple1, opTuple2, opTuple3, opEmptyTuple, opTuple:
		var items []Value
		switch op {
		case opTuple:
			var err error
			if items, err = d.popMark(); err != nil {
				return Value{}, false, err
			}
		case opEmptyTuple:
		default:
			n := int(op-opTuple1) + 1
			base := len(d.stack) - n
			if base < 0 || (len(d.marks) > 0 && base < d.marks[len(d.marks)-1]) {
				return Value{}, false, errors.New("stack underflow")
			}
			items = d.stack[base:]
			d.stack = d.stack[:base]
		}
		if err := d.resolveAll(items, 0, false); err != nil {
			return Value{}, false, err
		}
		t, err := d.sink.Tuple(items)
		if err != nil {
			return Value{}, false, err
		}
		if err := d.check("tuples", 0); err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.push(t)
	case opDict, opList:
		items, err := d.popMark()
		if err != nil {
			return Value{}, false, err
		}
		// The items are below the new container's Ref once it is pushed;
		// keep a copy because open() may grow the stack over them.
		kept := append([]Value(nil), items...)
		if op == opDict {
			if len(kept)%2 != 0 {
				return Value{}, false, errors.New("DICT with an odd number of values")
			}
			if err := d.open(Dict); err != nil {
				return Value{}, false, err
			}
		} else if err := d.open(List); err != nil {
			return Value{}, false, err
		}
		h := Handle(d.stack[len(d.stack)-1].N)
		if err := d.resolveAll(kept, h, true); err != nil {
			return Value{}, false, err
		}
		if len(kept) == 0 {
			return Value{}, false, nil
		}
		if op == opDict {
			err = d.sink.SetItems(h, kept)
		} else {
			err = d.sink.Append(h, kept)
		}
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.check("container items", 0)
	case opPop:
		if len(d.marks) > 0 && len(d.stack) == d.marks[len(d.marks)-1] {
			// POP of a MARK discards the mark (pickle's pop_mark semantics).
			d.marks = d.marks[:len(d.marks)-1]
			return Value{}, false, nil
		}
		v, err := d.pop()
		if err != nil {
			return Value{}, false, err
		}
		d.drop(v)
		return Value{}, false, nil
	case opPopMark:
		items, err := d.popMark()
		if err != nil {
			return Value{}, false, err
		}
		d.drop(items...)
		return Value{}, false, nil
	case opDup:
		if len(d.stack) == 0 {
			return Value{}, false, errors.New("stack underflow")
		}
		return Value{}, false, d.push(d.stack[len(d.stack)-1])
	case opProto:
		if err := d.need(1); err != nil {
			return Value{}, false, err
		}
		p := int(d.buf[d.pos])
		d.pos++
		if p > 5 {
			return Value{}, false, fmt.Errorf("unsupported pickle protocol %d", p)
		}
		d.proto = p
		return Value{}, false, nil
	case opFrame:
		// A read-size hint only: opcodes never straddle frames and objects
		// >= 64 KiB are written outside them, so a linear reader ignores it.
		if err := d.need(8); err != nil {
			return Value{}, false, err
		}
		d.pos += 8
		return Value{}, false, nil
	case opStop:
		v, err := d.pop()
		if err != nil {
			return Value{}, false, err
		}
		if len(d.stack) != 0 || len(d.marks) != 0 {
			return Value{}, false, fmt.Errorf("STOP with %d values and %d MARKs left on the stack", len(d.stack), len(d.marks))
		}
		v, err = d.resolve(v, 0, false)
		return v, true, err
	// Protocol 0 text opcodes.
	case opInt, opLong, opFloat, opGet, opPut, opUnicode, opString:
		ln, err := d.line()
		if err != nil {
			return Value{}, false, err
		}
		return Value{}, false, d.text(op, ln)
	case opGlobal, opStackGlobal, opReduce, opBuild, opInst, opObj, opNewObj, opNewObjEx,
		opPersID, opBinPersID, opExt1, opExt2, opExt4:
		return Value{}, false, errRefused
	case opEmptySet, opAddItems, opFrozenSet, opByteArray8, opNextBuffer, opReadOnlyBuffer:
		return Value{}, false, errors.New("unsupported: sets and out-of-band buffers never appear in memory snapshots")
	}
	return Value{}, false, errors.New("unknown opcode")
}

// decodeLong decodes a little-endian two's-complement integer of at most 9
// bytes. Nine bytes occur for 2**64-1 (torch writes unsigned -1 as a line
// number); values outside int64 and uint64 are refused.
func decodeLong(b []byte) (Value, error) {
	n := len(b)
	switch {
	case n == 0:
		return Value{Kind: KindInt}, nil
	case n > 9:
		return Value{}, errors.New("integer does not fit in 64 bits")
	}
	if n == 9 {
		switch b[8] {
		case 0x00: // positive, needs the 9th byte only for the sign
			return Value{Kind: KindUint, N: binary.LittleEndian.Uint64(b)}.normalize(), nil
		case 0xff: // negative: fits int64 only if bit 63 is set
			u := binary.LittleEndian.Uint64(b)
			if int64(u) < 0 {
				return Value{Kind: KindInt, N: u}, nil
			}
		}
		return Value{}, errors.New("integer does not fit in 64 bits")
	}
	var u uint64
	for i := n - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	if b[n-1]&0x80 != 0 && n < 8 { // sign-extend
		u |= ^uint64(0) << (8 * n)
	}
	return Value{Kind: KindInt, N: u}, nil
}

// normalize turns a KindUint that fits int64 into KindInt, so equal numbers
// have one representation.
func (v Value) normalize() Value {
	if v.Kind == KindUint && v.N <= math.MaxInt64 {
		v.Kind = KindInt
	}
	return v
}

// text runs a protocol 0 opcode with a text argument.
func (d *Decoder) text(op byte, ln []byte) error {
	s := string(ln)
	switch op {
	case opInt:
		switch s {
		case "00":
			return d.push(Value{Kind: KindBool})
		case "01":
			return d.push(Value{Kind: KindBool, N: 1})
		}
		return d.pushDecimal(s)
	case opLong:
		return d.pushDecimal(strings.TrimSuffix(s, "L"))
	case opFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("bad FLOAT %q", s)
		}
		return d.push(Value{Kind: KindFloat, N: math.Float64bits(f)})
	case opGet, opPut:
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("bad memo id %q", s)
		}
		if op == opGet {
			return d.memoGet(id)
		}
		return d.memoPut(id)
	case opUnicode:
		b, err := rawUnicodeEscape(ln)
		if err != nil {
			return err
		}
		return d.str(b, false)
	case opString:
		u, err := strconv.Unquote(pyQuoteToGo(s))
		if err != nil {
			return fmt.Errorf("bad STRING argument: %v", err)
		}
		return d.str([]byte(u), false)
	}
	return errors.New("unknown opcode")
}

func (d *Decoder) pushDecimal(s string) error {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return d.push(Value{Kind: KindInt, N: uint64(i)})
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("integer %q does not fit in 64 bits", s)
	}
	return d.push(Value{Kind: KindUint, N: u})
}

// pyQuoteToGo converts Python 2 repr quoting ('...' with \x escapes) into
// a Go double-quoted literal for strconv.Unquote.
func pyQuoteToGo(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		inner := s[1 : len(s)-1]
		inner = strings.ReplaceAll(inner, `\'`, `'`)
		inner = strings.ReplaceAll(inner, `"`, `\"`)
		return `"` + inner + `"`
	}
	return s
}

// rawUnicodeEscape decodes Python's raw-unicode-escape (protocol 0 UNICODE):
// only \uXXXX and \UXXXXXXXX are escapes.
func rawUnicodeEscape(b []byte) ([]byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\\' && i+1 < len(b) && (b[i+1] == 'u' || b[i+1] == 'U') {
			n := 4
			if b[i+1] == 'U' {
				n = 8
			}
			if i+2+n > len(b) {
				return nil, errors.New("truncated \\u escape in UNICODE")
			}
			r, err := strconv.ParseUint(string(b[i+2:i+2+n]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("bad escape in UNICODE: %v", err)
			}
			out = appendRune(out, rune(r))
			i += 1 + n
			continue
		}
		if c >= 0x80 { // latin-1 byte
			out = appendRune(out, rune(c))
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

func appendRune(b []byte, r rune) []byte {
	return append(b, string(r)...)
}
