package snapshot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"

	"github.com/vramscope/vramscope/internal/pickle"
)

// Decode decodes an uncompressed snapshot pickle from r. It reads r once,
// front to back, and never executes anything the file says: class and call
// opcodes are refused with an error naming the opcode and byte offset.
func Decode(r io.Reader) (*Snapshot, error) {
	b := newBuilder()
	top, err := decodeWith(b, r)
	if err != nil {
		return nil, fmt.Errorf("decoding snapshot: %w", err)
	}
	if err := b.finish(top); err != nil {
		return nil, fmt.Errorf("decoding snapshot: %w", err)
	}
	return b.sn, nil
}

// decodeWith runs the pickle VM over r with b as its sink.
func decodeWith(b *builder, r io.Reader) (pickle.Value, error) {
	dec := pickle.NewDecoder(r, b, pickle.DefaultLimits)
	top, err := dec.Decode()
	b.sn.Protocol = dec.Protocol()
	return top, err
}

// Kinds of the values the builder hands back to the VM once a container is
// closed.
const (
	vFrame      = pickle.KindUser + iota // N: FrameID
	vStack                               // N: StackID
	vEvent                               // N: index in builder.events
	vBlock                               // N: index in Snapshot.Blocks
	vSegment                             // N: index in builder.segs
	vAnnotation                          // N: index in builder.anns
	vHistory                             // N: index in builder.hist
	vRange                               // N: index in builder.ranges (a list of one typed kind)
	vEmpty                               // an empty list
	vList                                // N: index in builder.lists
	vTuple                               // N: index in builder.lists
	vDict                                // N: index in builder.dicts
)

// span is a list of typed records that sit contiguously in their arena.
type span struct {
	elem     pickle.Kind
	start, n int
}

// history is a torch 2.0 block history entry.
type history struct {
	addr, realSize uint64
	stack          StackID
}

// dictB accumulates one dict until it is closed.
type dictB struct {
	set   keySet
	f     [numKeys]pickle.Value
	extra []pickle.Value // unknown keys and their values, alternating
}

// listB accumulates one list. Typed records (frames excepted) are not
// copied: the list remembers where they sit in their arena, and only falls
// back to explicit indices if they are not contiguous.
type listB struct {
	elem    pickle.Kind // kind of every element so far; 0 while empty
	start   int
	n       int
	idx     []int // explicit arena indices, when not contiguous
	frames  []FrameID
	generic []pickle.Value // once elements of mixed or plain kinds appear
	isGen   bool
}

type container struct {
	dict bool
	d    dictB
	l    listB
}

// builder is the pickle.Sink that turns containers into the typed model.
type builder struct {
	sn    *Snapshot
	conts []container
	// scratch builds the containers that arrive whole (Dict, List).
	scratch container
	keyOf   []key    // by StringID
	actOf   []Action // by StringID
	events  eventArena
	// appended, if not nil, is closed once the events of the tails merged
	// so far are in events (split.go's appendLater), which holds
	// appendedN then: until then only the goroutines appending touch it.
	appended  chan struct{}
	appendedN int
	first     arenaFirst // firstEvent's
	segs      []Segment
	anns      []annotation
	hist      []history
	ranges    []span
	lists     [][]pickle.Value
	dicts     [][]pickle.Value

	// kept is the bytes of the containers kept as values (generic lists,
	// dicts and tuples) and of the open ones' items, for the decoder's
	// memory budget (pickle.Keeper); typed records cost the input more
	// bytes than they keep.
	kept int64

	lastStreamRaw int64
	lastStream    StreamID
	sawHistory    bool
	foreignKey    bool // a dict key was KindForeign (split.go)

	// blocks counts the blocks, withAddress those that carry "address"
	// (torch 2.1+): how finish tells the format.
	blocks, withAddress int

	// foreignStacks are the memo ids of the head's frames lists that a
	// tail's entries name, by pseudo stack id (split.go).
	foreignStacks  []uint64
	foreignStackOf map[uint64]StackID

	// recent caches interned strings by length and first and last byte.
	// torch writes compile_context "N/A" as a new string in every trace
	// entry, so the same few bytes arrive millions of times; a hit skips
	// the hash map (measured with callgrind on the 26 MB GPU-made seed:
	// 1.25 G instead of 1.33 G instructions for the whole decode).
	recent [256]recentString
	// recentStacks caches interned stacks by a hash of their frames:
	// each trace entry writes its frames as a new list, and entries repeat
	// a few stacks.
	recentStacks [256]StackID

	// tmpls are the trace entries' templates that Record builds
	// (pickle.RecordSink).
	tmpls []entryTmpl
}

type recentString struct {
	s  string
	id StringID
}

func newBuilder() *builder {
	b := &builder{sn: New()}
	b.syncStrings()
	return b
}

// syncStrings extends the per-string lookup tables to new strings.
func (b *builder) syncStrings() {
	for i := len(b.keyOf); i < len(b.sn.strings); i++ {
		s := b.sn.strings[i]
		b.keyOf = append(b.keyOf, keyByName[s])
		b.actOf = append(b.actOf, ParseAction(s))
	}
}

func (b *builder) String(p []byte, isBytes bool) (pickle.Value, error) {
	var id StringID
	slot := 0
	if len(p) > 0 {
		slot = (len(p)*31 + int(p[0])*7 + int(p[len(p)-1])) & 255
	}
	if r := &b.recent[slot]; r.s == string(p) && (len(p) > 0 || r.id == 0) {
		id = r.id
	} else {
		id = b.sn.internBytes(p)
		if int(id) >= len(b.keyOf) {
			b.syncStrings()
		}
		*r = recentString{s: b.sn.strings[id], id: id}
	}
	k := pickle.KindString
	if isBytes {
		k = pickle.KindBytes
	}
	return pickle.Value{Kind: k, N: uint64(id)}, nil
}

func (b *builder) Open(h pickle.Handle, c pickle.Container) error {
	for int(h) >= len(b.conts) {
		b.conts = append(b.conts, container{})
	}
	b.conts[h].reset(c == pickle.Dict)
	return nil
}

func (c *container) reset(dict bool) {
	c.dict = dict
	c.d.set = 0
	c.d.extra = c.d.extra[:0]
	c.l.elem, c.l.start, c.l.n, c.l.isGen = 0, 0, 0, false
	c.l.idx, c.l.frames, c.l.generic = nil, c.l.frames[:0], c.l.generic[:0]
}

func (b *builder) SetItems(h pickle.Handle, kv []pickle.Value) error {
	ct := &b.conts[h]
	if !ct.dict {
		return errors.New("SETITEMS on a list")
	}
	b.setItems(&ct.d, kv)
	b.kept += valueBytes * int64(len(kv))
	return nil
}

// valueBytes is a pickle.Value's size, what the builder keeps per item.
const valueBytes = 16

// Kept is what the builder keeps of the values it was given, for the
// decoder's memory budget.
func (b *builder) Kept() int64 { return b.kept }

func (b *builder) setItems(d *dictB, kv []pickle.Value) {
	keyOf := b.keyOf
	for ; len(kv) >= 2; kv = kv[2:] {
		k, v := kv[0], kv[1]
		if k.Kind == pickle.KindString && k.N < uint64(len(keyOf)) {
			if kk := keyOf[k.N]; kk != kUnknown {
				d.f[kk%numKeys] = v
				d.set |= 1 << kk
				continue
			}
		}
		// A key the tail of a split decode cannot name (split.go) would be
		// counted as unknown: the tail is not merged.
		b.foreignKey = b.foreignKey || k.Kind == pickle.KindForeign
		d.extra = append(d.extra, k, v)
	}
}

// Dict and List build a container that arrived whole (pickle.WholeSink)
// on a scratch container: Open, SetItems or Append, and Close in one call.
func (b *builder) Dict(kv []pickle.Value) (pickle.Value, error) {
	b.scratch.reset(true)
	b.setItems(&b.scratch.d, kv)
	return b.closeDict(&b.scratch.d)
}

func (b *builder) List(items []pickle.Value) (pickle.Value, error) {
	b.scratch.reset(false)
	b.appendItems(&b.scratch.l, items)
	return b.closeList(&b.scratch.l)
}

// entryTmpl is a compiled template of trace entries: the key at each
// position of a dict's items, the keys it sets, and where each key's
// value is in Record's kv.
type entryTmpl struct {
	keys [maxTmplKeys]key
	set  keySet
	at   fieldAt
}

// fieldAt is where event finds the value of each of eventFast's keys
// (kAction to kFrames) in what it reads, -1 where the entry has none.
type fieldAt [kFrames + 1]int8

// maxTmplKeys is the most keys a compiled template has: eventFast's.
const maxTmplKeys = 8

// Compile takes templates of trace entries with eventFast's keys alone,
// each once, "action" among them: closeDict would make each such dict an
// event, and Record then sets its fields with no lookup by key.
func (b *builder) Compile(keys []pickle.Value) (int, bool) {
	t := entryTmpl{at: noFields}
	if len(keys) > maxTmplKeys {
		return 0, false
	}
	for i, k := range keys {
		if k.Kind != pickle.KindString || k.N >= uint64(len(b.keyOf)) {
			return 0, false
		}
		kk := b.keyOf[k.N]
		if kk == kUnknown || eventFast&(1<<kk) == 0 || t.set.has(kk) {
			return 0, false
		}
		t.keys[i], t.set, t.at[kk] = kk, t.set|1<<kk, int8(2*i+1)
	}
	if !t.set.has(kAction) {
		return 0, false
	}
	for i, u := range b.tmpls {
		if u == t {
			return i, true
		}
	}
	b.tmpls = append(b.tmpls, t)
	return len(b.tmpls) - 1, true
}

// Record builds a trace entry of template tmpl as List and Dict would: its
// frames list first (kv[list]), then the event.
func (b *builder) Record(tmpl int, kv []pickle.Value, list int, items []pickle.Value) (lv, v pickle.Value, err error) {
	if list >= 0 {
		if lv, err = b.frames(items); err != nil {
			return lv, v, err
		}
		kv[list] = lv
	}
	t := &b.tmpls[tmpl]
	if v, ok := b.event(kv, &t.at); ok {
		return lv, v, nil
	}
	d := &b.scratch.d
	b.scratch.dict = true
	d.set, d.extra = t.set, d.extra[:0]
	for i, k := range t.keys[:len(kv)/2] {
		d.f[k] = kv[2*i+1]
	}
	v, err = b.checkedEvent(d) // event refused it: so would closeEvent's fast path
	return lv, v, err
}

// noFields is a fieldAt of no fields.
var noFields = func() (at fieldAt) {
	for k := range at {
		at[k] = -1
	}
	return at
}()

// Reusable reports whether lv is a stack (or the empty list): what a frames
// list's frames intern, the same for every list of those frames.
func (b *builder) Reusable(lv pickle.Value) bool { return lv.Kind == vStack || lv.Kind == vEmpty }

// event builds a trace entry from vals, the value of each of eventFast's
// keys at at's index, kAction's among them, with no lookup by key and
// none of the checked readers: Record's compiled templates and
// closeEvent's fast path. ok is false, having built nothing, for a value
// of another kind, an unknown action, or a stream or foreign stack too
// many: closeEvent's checked path then reports it. (A loop over the
// entry's keys, switching on each, took 270 instructions an entry, a
// tenth of the decode's: cachegrind, the bench seed.)
func (b *builder) event(vals []pickle.Value, at *fieldAt) (pickle.Value, bool) {
	if at[kAction] < 0 {
		return pickle.Value{}, false
	}
	act := vals[at[kAction]]
	if act.Kind != pickle.KindString || b.actOf[act.N] == ActionUnknown {
		return pickle.Value{}, false
	}
	addr, okAddr := fieldOf(vals, at[kAddr], pickle.KindInt)
	size, okSize := fieldOf(vals, at[kSize], pickle.KindInt)
	stream, okStream := fieldOf(vals, at[kStream], pickle.KindInt)
	timeUS, okTime := fieldOf(vals, at[kTimeUS], pickle.KindInt)
	cc, okCC := fieldOf(vals, at[kCompileContext], pickle.KindString)
	meta, okMeta := fieldOf(vals, at[kUserMetadata], pickle.KindString)
	if !okAddr || !okSize || !okStream || !okTime || !okCC || !okMeta || int64(addr) < 0 || int64(size) < 0 {
		return pickle.Value{}, false
	}
	c := Context{CompileContext: StringID(cc), UserMetadata: StringID(meta)}
	var frames pickle.Value // the frames list's value; KindNone if none
	if i := at[kFrames]; i >= 0 {
		switch frames = vals[i]; frames.Kind {
		case vStack, vEmpty, pickle.KindForeign:
		default:
			return pickle.Value{}, false
		}
	}
	st, ok := b.streamID(int64(stream))
	if !ok {
		return pickle.Value{}, false
	}
	stack := NoStack
	switch frames.Kind {
	case vStack:
		stack = StackID(frames.N)
	case vEmpty:
		stack = EmptyStack
	case pickle.KindForeign:
		if stack, ok = b.foreignStack(frames.N); !ok {
			return pickle.Value{}, false
		}
	}
	e := Event{Addr: addr, Size: size, TimeUS: int64(timeUS), Stack: stack, Stream: st, Action: b.actOf[act.N]}
	return pickle.Value{Kind: vEvent, N: uint64(b.push(e, c))}, true
}

// fieldOf is the number in vals[i], and whether it is of kind k; 0 and
// true where i < 0: the entry has no such field.
func fieldOf(vals []pickle.Value, i int8, k pickle.Kind) (uint64, bool) {
	if i < 0 {
		return 0, true
	}
	return vals[i].N, vals[i].Kind == k
}

// frames is List(items) for a list of frames, without a container: each
// trace entry has one.
func (b *builder) frames(items []pickle.Value) (pickle.Value, error) {
	fs := b.scratch.l.frames[:0]
	for _, v := range items {
		if v.Kind != vFrame && (v.Kind != pickle.KindForeign || v.N >= foreignTag) {
			return b.List(items)
		}
		fs = append(fs, frameOf(v))
	}
	b.scratch.l.frames = fs
	return b.stackValue(fs), nil
}

// stackValue is the value of a list of frames: an empty list, or the
// stack it interns.
func (b *builder) stackValue(frames []FrameID) pickle.Value {
	if len(frames) == 0 {
		return pickle.Value{Kind: vEmpty}
	}
	return pickle.Value{Kind: vStack, N: uint64(b.internStack(frames))}
}

func (b *builder) Append(h pickle.Handle, items []pickle.Value) error {
	ct := &b.conts[h]
	if ct.dict {
		return errors.New("APPEND on a dict")
	}
	b.appendItems(&ct.l, items)
	b.kept += valueBytes * int64(len(items))
	return nil
}

func (b *builder) appendItems(l *listB, items []pickle.Value) {
	// A trace's batches: the next events of the arena, each after the
	// list's last. Counted in a loop of their own, not one at a time
	// through the kinds below (40 instructions an event).
	if !l.isGen && l.idx == nil && l.elem != 0 && l.elem != vFrame {
		next := uint64(l.start + l.n)
		j := 0
		for j < len(items) && items[j].Kind == l.elem && items[j].N == next {
			j++
			next++
		}
		l.n += j
		items = items[j:]
	}
	for _, v := range items {
		if l.isGen {
			l.generic = append(l.generic, v)
			continue
		}
		if (v.Kind == vFrame || v.Kind == pickle.KindForeign && v.N < foreignTag) && (l.elem == 0 || l.elem == vFrame) {
			l.elem = vFrame
			l.frames = append(l.frames, frameOf(v))
			l.n++
			continue
		}
		if isArenaKind(v.Kind) && (l.elem == 0 || l.elem == v.Kind) {
			i := int(v.N)
			switch {
			case l.elem == 0:
				l.elem, l.start, l.n = v.Kind, i, 1
			case l.idx == nil && i == l.start+l.n:
				l.n++
			default:
				if l.idx == nil {
					l.idx = make([]int, 0, l.n+1)
					for j := 0; j < l.n; j++ {
						l.idx = append(l.idx, l.start+j)
					}
				}
				l.idx = append(l.idx, i)
				l.n++
			}
			continue
		}
		b.toGeneric(l)
		l.generic = append(l.generic, v)
	}
}

func isArenaKind(k pickle.Kind) bool {
	switch k {
	case vEvent, vBlock, vSegment, vAnnotation, vHistory:
		return true
	}
	return false
}

// toGeneric turns a typed list into a generic one, keeping its elements.
func (b *builder) toGeneric(l *listB) {
	if l.isGen {
		return
	}
	l.isGen = true
	l.generic = l.generic[:0]
	switch {
	case l.elem == vFrame:
		for _, f := range l.frames {
			l.generic = append(l.generic, pickle.Value{Kind: vFrame, N: uint64(f)})
		}
	case l.elem != 0:
		for j := 0; j < l.n; j++ {
			i := l.start + j
			if l.idx != nil {
				i = l.idx[j]
			}
			l.generic = append(l.generic, pickle.Value{Kind: l.elem, N: uint64(i)})
		}
	}
}

func (b *builder) Tuple(items []pickle.Value) (pickle.Value, error) {
	b.lists = append(b.lists, append([]pickle.Value(nil), items...))
	b.kept += valueBytes * int64(len(items)+2)
	return pickle.Value{Kind: vTuple, N: uint64(len(b.lists) - 1)}, nil
}

func (b *builder) Close(h pickle.Handle) (pickle.Value, error) {
	ct := &b.conts[h]
	if ct.dict {
		return b.closeDict(&ct.d)
	}
	return b.closeList(&ct.l)
}

func (b *builder) closeList(l *listB) (pickle.Value, error) {
	switch {
	case l.isGen:
		b.lists = append(b.lists, append([]pickle.Value(nil), l.generic...))
		b.kept += valueBytes * int64(len(l.generic)+2)
		return pickle.Value{Kind: vList, N: uint64(len(b.lists) - 1)}, nil
	case l.elem == 0, l.elem == vFrame:
		return b.stackValue(l.frames), nil
	}
	start := l.start
	if l.idx != nil {
		// Not contiguous (an element was shared with another list): copy the
		// elements to the end of their arena, where they are.
		start = b.arenaLen(l.elem)
		for _, i := range l.idx {
			b.copyElem(l.elem, i)
		}
	}
	b.ranges = append(b.ranges, span{elem: l.elem, start: start, n: l.n})
	return pickle.Value{Kind: vRange, N: uint64(len(b.ranges) - 1)}, nil
}

// internStack is sn.InternStack behind the cache of recent stacks: a hit
// costs a hash and a compare of the frames instead of building the map's
// key and hashing it (on the 996 MB bench file InternStack took 0.17 s of
// CPU time per decode).
func (b *builder) internStack(frames []FrameID) StackID {
	h := uint32(2166136261) // FNV-1a over the frame ids
	for _, f := range frames {
		h = (h ^ uint32(f)) * 16777619
	}
	slot := &b.recentStacks[h>>24]
	if id := *slot; id > EmptyStack && slices.Equal(b.sn.Stack(id), frames) {
		return id
	}
	id := b.sn.InternStack(frames)
	*slot = id
	return id
}

func (b *builder) arenaLen(k pickle.Kind) int {
	switch k {
	case vEvent:
		return b.eventCount()
	case vBlock:
		return len(b.sn.Blocks)
	case vSegment:
		return len(b.segs)
	case vAnnotation:
		return len(b.anns)
	}
	return len(b.hist)
}

func (b *builder) copyElem(k pickle.Kind, i int) {
	switch k {
	case vEvent:
		b.syncEvents()
		e := b.events.at(i)
		b.events.push(&e, b.events.context(i))
	case vBlock:
		b.sn.Blocks = append(b.sn.Blocks, b.sn.Blocks[i])
	case vSegment:
		b.segs = append(b.segs, b.segs[i])
	case vAnnotation:
		b.anns = append(b.anns, b.anns[i])
	default:
		b.hist = append(b.hist, b.hist[i])
	}
}

func (b *builder) closeDict(d *dictB) (pickle.Value, error) {
	switch {
	case d.set.has(kAction):
		return b.closeEvent(d)
	case d.set.has(kSegments) || d.set.has(kDeviceTraces):
		return b.generic(d), nil // the top dict: finish reads it
	case d.set.has(kBlocks) || d.set.has(kTotalSize):
		return b.closeSegment(d)
	case d.set.has(kState):
		return b.closeBlock(d)
	case d.set.has(kRealSize):
		return b.closeHistory(d)
	case d.set.has(kStage) && d.set.has(kName):
		return b.closeAnnotation(d)
	case d.set.has(kFilename) && d.set.has(kName):
		return b.closeFrame(d)
	}
	return b.generic(d), nil
}

// generic keeps a dict the model does not type (allocator_settings, unknown
// additions) as alternating keys and values.
func (b *builder) generic(d *dictB) pickle.Value {
	kv := make([]pickle.Value, 0, 2*popcount(d.set)+len(d.extra))
	for k := key(1); k < numKeys; k++ {
		if d.set.has(k) {
			kv = append(kv, pickle.Value{Kind: pickle.KindString, N: uint64(b.sn.InternString(keyNames[k]))}, d.f[k])
		}
	}
	kv = append(kv, d.extra...)
	b.dicts = append(b.dicts, kv)
	b.kept += valueBytes * int64(len(kv)+2)
	return pickle.Value{Kind: vDict, N: uint64(len(b.dicts) - 1)}
}

func popcount(s keySet) int {
	n := 0
	for ; s != 0; s &= s - 1 {
		n++
	}
	return n
}

// countExtra records the keys of a typed record that the model does not
// keep for that record: unknown keys, and known keys of other records
// (torch after 2.11 puts user_metadata on blocks, say).
func (b *builder) countExtra(where string, d *dictB, uses keySet) {
	for i := 0; i < len(d.extra); i += 2 {
		b.sn.Unknown[where+"."+b.keyString(d.extra[i])]++
	}
	for other := d.set &^ uses; other != 0; other &= other - 1 {
		b.sn.Unknown[where+"."+keyNames[bits.TrailingZeros64(uint64(other))]]++
	}
}

// The keys each record type keeps.
const (
	eventKeys = eventFast | 1<<kDeviceFree | 1<<kCppFrames
	frameKeys = keySet(1<<kName | 1<<kFilename | 1<<kLine)
	blockKeys = keySet(1<<kState | 1<<kSize | 1<<kAddress | 1<<kFrames | 1<<kRequestedSize |
		1<<kHistory | 1<<kCppFrames)
	historyKeys = keySet(1<<kAddr | 1<<kRealSize | 1<<kFrames | 1<<kCppFrames)
	segmentKeys = keySet(1<<kDevice | 1<<kAddress | 1<<kTotalSize | 1<<kAllocatedSize |
		1<<kActiveSize | 1<<kRequestedSize | 1<<kStream | 1<<kSegmentType | 1<<kSegmentPoolID |
		1<<kIsExpandable | 1<<kFrames | 1<<kBlocks)
	annotationKeys = keySet(1<<kStage | 1<<kName | 1<<kDevice | 1<<kTimeUS)
)

func (b *builder) keyString(k pickle.Value) string {
	budget := maxGeneric
	return b.genericKey(k, 0, &budget)
}

// genericKey is keyString within a generic conversion (toAny), spending its
// budget: a key of its own budget each, a dict reached again and again
// through shared lists converted its keys without end (a fuzzed file of
// 300 bytes ran past 10 minutes).
func (b *builder) genericKey(k pickle.Value, depth int, budget *int) string {
	if k.Kind == pickle.KindString || k.Kind == pickle.KindBytes {
		return b.sn.strings[k.N]
	}
	return fmt.Sprint(b.toAny(k, depth, budget))
}

// Field readers. They name the record and key in their errors: a snapshot
// with a string where a size belongs is reported, not guessed at.

func (b *builder) uintField(what string, d *dictB, k key) (uint64, error) {
	if !d.set.has(k) {
		return 0, nil
	}
	if u, ok := d.f[k].Uint(); ok {
		return u, nil
	}
	return 0, fmt.Errorf("%s: %q is %s, want a non-negative int", what, keyNames[k], b.describe(d.f[k]))
}

func (b *builder) intField(what string, d *dictB, k key) (int64, error) {
	if !d.set.has(k) {
		return 0, nil
	}
	if i, ok := d.f[k].Int(); ok {
		return i, nil
	}
	return 0, fmt.Errorf("%s: %q is %s, want an int", what, keyNames[k], b.describe(d.f[k]))
}

func (b *builder) strField(what string, d *dictB, k key) (StringID, error) {
	if !d.set.has(k) {
		return 0, nil
	}
	if v := d.f[k]; v.Kind == pickle.KindString {
		return StringID(v.N), nil
	}
	return 0, fmt.Errorf("%s: %q is %s, want a str", what, keyNames[k], b.describe(d.f[k]))
}

func (b *builder) boolField(what string, d *dictB, k key) (bool, error) {
	if !d.set.has(k) {
		return false, nil
	}
	if v := d.f[k]; v.Kind == pickle.KindBool || v.Kind == pickle.KindInt {
		return v.N != 0, nil
	}
	return false, fmt.Errorf("%s: %q is %s, want a bool", what, keyNames[k], b.describe(d.f[k]))
}

// stackField reads "frames" (plus torch 2.0's "cpp_frames" strings, which
// become frames innermost of the Python ones: the C++ frames of a 2.0 trace
// are the allocator and dispatcher calls beneath the Python call). An
// absent key is NoStack.
func (b *builder) stackField(what string, d *dictB) (StackID, error) {
	id := NoStack
	if d.set.has(kFrames) {
		switch v := d.f[kFrames]; v.Kind {
		case vStack:
			id = StackID(v.N)
		case vEmpty:
			id = EmptyStack
		default:
			return 0, fmt.Errorf("%s: \"frames\" is %s, want a list of frames", what, b.describe(v))
		}
	}
	if !d.set.has(kCppFrames) {
		return id, nil
	}
	v := d.f[kCppFrames]
	if v.Kind == vEmpty {
		if id == NoStack {
			id = EmptyStack
		}
		return id, nil
	}
	if v.Kind != vList {
		return 0, fmt.Errorf("%s: \"cpp_frames\" is %s, want a list of str", what, b.describe(v))
	}
	var frames []FrameID
	for _, s := range b.lists[v.N] {
		if s.Kind != pickle.KindString {
			return 0, fmt.Errorf("%s: \"cpp_frames\" holds %s, want str", what, b.describe(s))
		}
		frames = append(frames, b.sn.InternFrame(Frame{Name: b.sn.strings[s.N]}))
	}
	return b.sn.InternStack(append(frames, b.sn.Stack(id)...)), nil
}

func (b *builder) stream(what string, d *dictB) (StreamID, error) {
	raw, err := b.intField(what, d, kStream)
	if err != nil {
		return 0, err
	}
	id, ok := b.streamID(raw)
	if !ok {
		return 0, fmt.Errorf("%s: more than %d distinct streams", what, math.MaxUint16)
	}
	return id, nil
}

// streamID interns the stream raw; ok is false if it would be one stream
// too many.
func (b *builder) streamID(raw int64) (id StreamID, ok bool) {
	if raw == b.lastStreamRaw {
		return b.lastStream, true
	}
	if len(b.sn.Streams) > math.MaxUint16 {
		return 0, false
	}
	id = b.sn.InternStream(raw)
	b.lastStreamRaw, b.lastStream = raw, id
	return id, true
}

// eventFast lists the keys a torch 2.x trace entry may carry for
// closeEvent's fast path.
const eventFast = keySet(1<<kAction | 1<<kAddr | 1<<kSize | 1<<kStream | 1<<kTimeUS |
	1<<kCompileContext | 1<<kUserMetadata | 1<<kFrames)

func (b *builder) closeEvent(d *dictB) (pickle.Value, error) {
	// Fast path: millions of entries have the usual keys with the usual
	// types; event reads them without the checked readers (which were 400
	// instructions per entry). Anything unusual takes the checked path,
	// which reports precise errors.
	if d.set&^eventFast == 0 && len(d.extra) == 0 && d.set.has(kAction) {
		at := noFields
		for s := d.set; s != 0; s &= s - 1 {
			k := bits.TrailingZeros64(uint64(s))
			at[k] = int8(k)
		}
		if v, ok := b.event(d.f[:], &at); ok {
			return v, nil
		}
	}
	return b.checkedEvent(d)
}

// checkedEvent builds a trace entry with the checked readers: it takes
// whatever a snapshot may write, and reports precisely what it cannot.
func (b *builder) checkedEvent(d *dictB) (pickle.Value, error) {
	const what = "trace entry"
	var e Event
	var err error
	act := d.f[kAction]
	if act.Kind != pickle.KindString {
		return pickle.Value{}, fmt.Errorf("%s: \"action\" is %s, want a str", what, b.describe(act))
	}
	e.Action = b.actOf[act.N]
	if e.Action == ActionUnknown {
		b.sn.Unknown["action."+b.sn.strings[act.N]]++
	}
	if d.set.has(kDeviceFree) {
		if e.Addr, err = b.uintField(what, d, kDeviceFree); err != nil {
			return pickle.Value{}, err
		}
	} else if e.Addr, err = b.uintField(what, d, kAddr); err != nil {
		return pickle.Value{}, err
	}
	if e.Size, err = b.uintField(what, d, kSize); err != nil {
		return pickle.Value{}, err
	}
	if e.Stream, err = b.stream(what, d); err != nil {
		return pickle.Value{}, err
	}
	if e.TimeUS, err = b.intField(what, d, kTimeUS); err != nil {
		return pickle.Value{}, err
	}
	var c Context
	if c.CompileContext, err = b.strField(what, d, kCompileContext); err != nil {
		return pickle.Value{}, err
	}
	if d.set.has(kUserMetadata) && d.f[kUserMetadata].Kind != pickle.KindString {
		// Newer torch may write structured metadata; keep going without it.
		b.sn.Unknown["event.user_metadata(non-str)"]++
	} else if c.UserMetadata, err = b.strField(what, d, kUserMetadata); err != nil {
		return pickle.Value{}, err
	}
	if e.Stack, err = b.stackField(what, d); err != nil {
		return pickle.Value{}, err
	}
	if len(d.extra) > 0 || d.set&^eventKeys != 0 {
		b.countExtra("event", d, eventKeys)
	}
	return pickle.Value{Kind: vEvent, N: uint64(b.push(e, c))}, nil
}

func (b *builder) closeFrame(d *dictB) (pickle.Value, error) {
	const what = "frame"
	name, err := b.strField(what, d, kName)
	if err != nil {
		return pickle.Value{}, err
	}
	file, err := b.strField(what, d, kFilename)
	if err != nil {
		return pickle.Value{}, err
	}
	line, err := b.uintField(what, d, kLine)
	if err != nil {
		// torch writes unknown lines as 2**64-1; a negative -1 means the same.
		if i, ok := d.f[kLine].Int(); ok && i == -1 {
			line, err = UnknownLine, nil
		} else {
			return pickle.Value{}, err
		}
	}
	if len(d.extra) > 0 || d.set&^frameKeys != 0 {
		b.countExtra("frame", d, frameKeys) // FX augmentation: fx_node_op, fx_node_name, ...
	}
	id := b.sn.InternFrame(Frame{Name: b.sn.strings[name], Filename: b.sn.strings[file], Line: line})
	return pickle.Value{Kind: vFrame, N: uint64(id)}, nil
}

var blockStates = map[string]BlockState{
	"inactive":             Inactive,
	"active_allocated":     ActiveAllocated,
	"active_pending_free":  ActivePendingFree,
	"active_awaiting_free": ActivePendingFree, // the name in 2.11's docstring
}

func (b *builder) closeBlock(d *dictB) (pickle.Value, error) {
	const what = "block"
	var blk Block
	var err error
	st, err := b.strField(what, d, kState)
	if err != nil {
		return pickle.Value{}, err
	}
	state, ok := blockStates[b.sn.strings[st]]
	if !ok {
		return pickle.Value{}, fmt.Errorf("%s: unknown state %q", what, b.sn.strings[st])
	}
	blk.State = state
	if blk.Size, err = b.uintField(what, d, kSize); err != nil {
		return pickle.Value{}, err
	}
	if blk.Address, err = b.uintField(what, d, kAddress); err != nil {
		return pickle.Value{}, err
	}
	if blk.Stack, err = b.stackField(what, d); err != nil {
		return pickle.Value{}, err
	}
	if d.set.has(kAddress) {
		b.withAddress++
	}
	// torch 1.13 and 2.0 keep a block's allocations in "history", newest
	// first (the allocator's history chain starts at the latest one, and
	// torch's own _memory_viz reads history[0]); 2.0 also writes
	// requested_size beside it. Only an active block's newest entry is the
	// allocation that holds it: a free block's entries are gone tensors.
	var current *history
	if d.set.has(kHistory) {
		b.sawHistory = true
		switch hv := d.f[kHistory]; {
		case hv.Kind == vRange && b.ranges[hv.N].elem == vHistory:
			if blk.State.Active() {
				current = &b.hist[b.ranges[hv.N].start]
			}
		case hv.Kind != vEmpty:
			return pickle.Value{}, fmt.Errorf("%s: \"history\" is %s, want a list of history entries", what, b.describe(hv))
		}
	}
	if current != nil && blk.Stack == NoStack {
		blk.Stack = current.stack
	}
	switch {
	case d.set.has(kRequestedSize):
		if blk.RequestedSize, err = b.uintField(what, d, kRequestedSize); err != nil {
			return pickle.Value{}, err
		}
	case current != nil:
		blk.RequestedSize = current.realSize
	case blk.State.Active():
		// torch <= 1.12, or an active block without history: nothing
		// better than the block size.
		blk.RequestedSize = blk.Size
		b.sn.RequestedUnknown++
	}
	if len(d.extra) > 0 || d.set&^blockKeys != 0 {
		b.countExtra("block", d, blockKeys)
	}
	b.blocks++
	b.sn.Blocks = append(b.sn.Blocks, blk)
	return pickle.Value{Kind: vBlock, N: uint64(len(b.sn.Blocks) - 1)}, nil
}

func (b *builder) closeHistory(d *dictB) (pickle.Value, error) {
	const what = "block history entry"
	var h history
	var err error
	if h.addr, err = b.uintField(what, d, kAddr); err != nil {
		return pickle.Value{}, err
	}
	if h.realSize, err = b.uintField(what, d, kRealSize); err != nil {
		return pickle.Value{}, err
	}
	if h.stack, err = b.stackField(what, d); err != nil {
		return pickle.Value{}, err
	}
	if len(d.extra) > 0 || d.set&^historyKeys != 0 {
		b.countExtra("history", d, historyKeys)
	}
	b.hist = append(b.hist, h)
	return pickle.Value{Kind: vHistory, N: uint64(len(b.hist) - 1)}, nil
}

func (b *builder) closeSegment(d *dictB) (pickle.Value, error) {
	const what = "segment"
	var s Segment
	var err error
	dev, err := b.intField(what, d, kDevice)
	if err != nil {
		return pickle.Value{}, err
	}
	s.Device = int(dev)
	if s.Address, err = b.uintField(what, d, kAddress); err != nil {
		return pickle.Value{}, err
	}
	if s.TotalSize, err = b.uintField(what, d, kTotalSize); err != nil {
		return pickle.Value{}, err
	}
	if s.AllocatedSize, err = b.uintField(what, d, kAllocatedSize); err != nil {
		return pickle.Value{}, err
	}
	if s.ActiveSize, err = b.uintField(what, d, kActiveSize); err != nil {
		return pickle.Value{}, err
	}
	if s.RequestedSize, err = b.uintField(what, d, kRequestedSize); err != nil {
		return pickle.Value{}, err
	}
	if s.Stream, err = b.stream(what, d); err != nil {
		return pickle.Value{}, err
	}
	if d.set.has(kSegmentType) {
		t, err := b.strField(what, d, kSegmentType)
		if err != nil {
			return pickle.Value{}, err
		}
		switch b.sn.strings[t] {
		case "small":
			s.Type = Small
		case "large":
			s.Type = Large
		default:
			return pickle.Value{}, fmt.Errorf("%s: unknown segment_type %q", what, b.sn.strings[t])
		}
	}
	if d.set.has(kSegmentPoolID) {
		if s.Pool, err = b.poolID(d.f[kSegmentPoolID]); err != nil {
			return pickle.Value{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	if s.Expandable, err = b.boolField(what, d, kIsExpandable); err != nil {
		return pickle.Value{}, err
	}
	if s.Stack, err = b.stackField(what, d); err != nil {
		return pickle.Value{}, err
	}
	s.FirstBlock = len(b.sn.Blocks)
	switch bv := d.f[kBlocks]; {
	case !d.set.has(kBlocks) || bv.Kind == vEmpty:
	case bv.Kind == vRange && b.ranges[bv.N].elem == vBlock:
		r := b.ranges[bv.N]
		s.FirstBlock, s.NumBlocks = r.start, r.n
	default:
		return pickle.Value{}, fmt.Errorf("%s: \"blocks\" is %s, want a list of blocks", what, b.describe(bv))
	}
	b.fillOlderFields(d, &s)
	if len(d.extra) > 0 || d.set&^segmentKeys != 0 {
		b.countExtra("segment", d, segmentKeys)
	}
	b.segs = append(b.segs, s)
	return pickle.Value{Kind: vSegment, N: uint64(len(b.segs) - 1)}, nil
}

// fillOlderFields derives what files before torch 2.1 do not carry: block
// addresses (segment address + running size, as MemoryViz does) and the
// segment's requested size.
func (b *builder) fillOlderFields(d *dictB, s *Segment) {
	blocks := b.sn.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks]
	// Blocks tile their segment in address order; before 2.1 none carries
	// its address.
	addr := s.Address
	for i := range blocks {
		if blocks[i].Address == 0 {
			blocks[i].Address = addr
		}
		addr = blocks[i].Address + blocks[i].Size
	}
	if !d.set.has(kRequestedSize) {
		for _, blk := range blocks {
			if blk.State.Active() {
				s.RequestedSize += blk.RequestedSize
			}
		}
	}
}

func (b *builder) poolID(v pickle.Value) (PoolID, error) {
	if v.Kind == vTuple || v.Kind == vList {
		t := b.lists[v.N]
		if len(t) == 2 {
			x, ok1 := t[0].Int()
			y, ok2 := t[1].Int()
			if ok1 && ok2 {
				return PoolID{x, y}, nil
			}
		}
	}
	return PoolID{}, fmt.Errorf("\"segment_pool_id\" is %s, want a pair of ints", b.describe(v))
}

// annotation is an Annotation as the builder keeps it until finish: its
// strings by id, so that the tens of thousands a training run records hold
// no pointer for the collector to scan and the barriers to guard while
// they are appended (a third of decoding them went to those).
type annotation struct {
	stage, name StringID
	device      int
	timeUS      int64
}

func (b *builder) closeAnnotation(d *dictB) (pickle.Value, error) {
	const what = "external annotation"
	stage, err := b.strField(what, d, kStage)
	if err != nil {
		return pickle.Value{}, err
	}
	name, err := b.strField(what, d, kName)
	if err != nil {
		return pickle.Value{}, err
	}
	dev, err := b.intField(what, d, kDevice)
	if err != nil {
		return pickle.Value{}, err
	}
	timeUS, err := b.intField(what, d, kTimeUS)
	if err != nil {
		return pickle.Value{}, err
	}
	if len(d.extra) > 0 || d.set&^annotationKeys != 0 {
		b.countExtra("annotation", d, annotationKeys)
	}
	b.anns = append(b.anns, annotation{stage: stage, name: name, device: int(dev), timeUS: timeUS})
	return pickle.Value{Kind: vAnnotation, N: uint64(len(b.anns) - 1)}, nil
}
