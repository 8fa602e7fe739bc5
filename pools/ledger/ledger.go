// Package ledger reads the append-only ledger that the Python hook's
// pool() writes for a pool a program manages itself (a KV cache's pages,
// request slots): one JSON object a line, a header first, then interned
// stacks, allocations, frees and idle marks (README, "Pool ledger").
// Replaying it says what is still held at the end and at each idle
// moment, by which stack and for which owner.
package ledger

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Format is the header's "format".
const Format = "vramscope-pool-ledger"

// Frame is one frame of an allocating stack, innermost first.
type Frame struct {
	File     string
	Line     int
	Function string
}

// Holding is one allocation not (wholly) freed.
type Holding struct {
	Stack int
	Owner string
	N     int64
	Slots []int64
	At    float64
}

// Idle is one idle mark: what was held when nothing should have been.
type Idle struct {
	At   float64
	Held int64
}

// Ledger is a replayed ledger.
type Ledger struct {
	Pool, Unit string
	Capacity   int64
	PID, Rank  int
	Stacks     map[int][]Frame
	// End is what is held when the ledger ends; AtIdle what was held at
	// the last idle mark that found anything held.
	End, AtIdle []Holding
	Idles       []Idle
	// Lines counts the records read; Unparsed those that could not be.
	Lines, Unparsed int
	FirstUnparsed   string
}

// Detect reports whether data starts with a ledger's header.
func Detect(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte(`{"format":"`+Format+`"`))
}

type record struct {
	Op       string          `json:"op"`
	T        float64         `json:"t"`
	N        int64           `json:"n"`
	Owner    string          `json:"owner"`
	Slots    []int64         `json:"slots"`
	Stack    int             `json:"stack"`
	ID       int             `json:"id"`
	RawFrame json.RawMessage `json:"frames"`
	// header
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Pool     string `json:"pool"`
	Capacity int64  `json:"capacity"`
	Unit     string `json:"unit"`
	PID      int    `json:"pid"`
	Rank     int    `json:"rank"`
}

// Read replays a ledger. A record that does not parse is counted, not
// fatal: a program killed mid-write leaves half a line.
func Read(r io.Reader) (*Ledger, error) {
	l := &Ledger{Stacks: map[int][]Frame{}}
	open := &book{byOwner: map[string][]*Holding{}, bySlot: map[int64]*Holding{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		l.Lines++
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil || !l.apply(open, rec) {
			l.Unparsed++
			if l.FirstUnparsed == "" {
				l.FirstUnparsed = fmt.Sprintf("line %d: %.120s", l.Lines, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pool ledger, record %d: %w", l.Lines+1, err)
	}
	if l.Lines == 0 || l.Pool == "" {
		return nil, fmt.Errorf("pool ledger: no %s header", Format)
	}
	l.End = open.held()
	return l, nil
}

// apply replays one record; false when it makes no sense.
func (l *Ledger) apply(b *book, rec record) bool {
	switch rec.Op {
	case "":
		if rec.Format != Format || rec.Version != 1 {
			return false
		}
		l.Pool, l.Unit, l.Capacity, l.PID, l.Rank = rec.Pool, rec.Unit, rec.Capacity, rec.PID, rec.Rank
	case "stack":
		var frames [][3]any
		if err := json.Unmarshal(rec.RawFrame, &frames); err != nil {
			return false
		}
		var fs []Frame
		for _, f := range frames {
			file, _ := f[0].(string)
			line, _ := f[1].(float64)
			fn, _ := f[2].(string)
			fs = append(fs, Frame{File: file, Line: int(line), Function: fn})
		}
		l.Stacks[rec.ID] = fs
	case "alloc":
		h := &Holding{Stack: rec.Stack, Owner: rec.Owner, N: rec.N, Slots: rec.Slots, At: rec.T}
		b.byOwner[h.Owner] = append(b.byOwner[h.Owner], h)
		for _, s := range h.Slots {
			b.bySlot[s] = h
		}
		b.order = append(b.order, h)
	case "free":
		b.free(rec)
	case "idle":
		held := b.held()
		var n int64
		for _, h := range held {
			n += h.N
		}
		l.Idles = append(l.Idles, Idle{At: rec.T, Held: n})
		if n > 0 {
			l.AtIdle = held
		}
	default:
		return false
	}
	return true
}

// book is the allocations still open, in order, findable by owner and
// by slot.
type book struct {
	order   []*Holding
	byOwner map[string][]*Holding
	bySlot  map[int64]*Holding
}

// free closes slots by index, else n units of the owner's allocations,
// oldest first.
func (b *book) free(rec record) {
	if len(rec.Slots) > 0 {
		for _, s := range rec.Slots {
			if h := b.bySlot[s]; h != nil {
				delete(b.bySlot, s)
				h.N--
			}
		}
		return
	}
	n := rec.N
	for _, h := range b.byOwner[rec.Owner] {
		if n <= 0 {
			break
		}
		d := min(n, h.N)
		h.N -= d
		n -= d
	}
	b.byOwner[rec.Owner] = slices.DeleteFunc(b.byOwner[rec.Owner], func(h *Holding) bool { return h.N <= 0 })
	if len(b.byOwner[rec.Owner]) == 0 {
		delete(b.byOwner, rec.Owner)
	}
}

// held lists the open allocations, compacting the book.
func (b *book) held() []Holding {
	b.order = slices.DeleteFunc(b.order, func(h *Holding) bool { return h.N <= 0 })
	out := make([]Holding, len(b.order))
	for i, h := range b.order {
		out[i] = *h
		if len(h.Slots) > 0 {
			out[i].Slots = slices.DeleteFunc(slices.Clone(h.Slots), func(s int64) bool { return b.bySlot[s] != h })
		}
	}
	return out
}

// Group is what the holdings of one stack, or one owner, add up to.
type Group struct {
	Key    string
	Stack  int
	N      int64
	Allocs int
	Owners []string
}

// ByStack groups holdings by the stack that allocated them, most held first.
func ByStack(hs []Holding) []Group {
	return groupBy(hs, func(h Holding) string { return strconv.Itoa(h.Stack) })
}

// ByOwner groups holdings by owner, most held first: owners whose frees
// never came.
func ByOwner(hs []Holding) []Group {
	return groupBy(hs, func(h Holding) string { return h.Owner })
}

func groupBy(hs []Holding, key func(Holding) string) []Group {
	idx := map[string]int{}
	var out []Group
	for _, h := range hs {
		k := key(h)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Group{Key: k, Stack: h.Stack})
		}
		g := &out[i]
		g.N += h.N
		g.Allocs++
		if h.Owner != "" && !slices.Contains(g.Owners, h.Owner) {
			g.Owners = append(g.Owners, h.Owner)
		}
	}
	slices.SortStableFunc(out, func(a, b Group) int { return cmp.Compare(b.N, a.N) })
	return out
}
