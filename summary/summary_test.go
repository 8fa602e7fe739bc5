package summary

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

// builder makes snapshots by hand: segments are appended with their blocks
// laid out from the segment's address, and segment fields are derived from
// the blocks the way torch derives them.
type builder struct {
	sn    *snapshot.Snapshot
	stack snapshot.StackID // a real (non-empty) stack
}

func newBuilder() *builder {
	sn := snapshot.New()
	f := sn.InternFrame(snapshot.Frame{Name: "forward", Filename: "model.py", Line: 12})
	return &builder{sn: sn, stack: sn.InternStack([]snapshot.FrameID{f})}
}

type blk struct {
	size, requested uint64
	state           snapshot.BlockState
	stack           snapshot.StackID
}

func (b *builder) segment(dev int, addr uint64, stream int64, typ snapshot.SegmentType, pool snapshot.PoolID, blocks ...blk) {
	seg := snapshot.Segment{
		Device: dev, Address: addr, Stream: b.sn.InternStream(stream), Type: typ, Pool: pool,
		FirstBlock: len(b.sn.Blocks), NumBlocks: len(blocks), Stack: snapshot.EmptyStack,
	}
	a := addr
	for _, bl := range blocks {
		b.sn.Blocks = append(b.sn.Blocks, snapshot.Block{Address: a, Size: bl.size, RequestedSize: bl.requested, State: bl.state, Stack: bl.stack})
		a += bl.size
		seg.TotalSize += bl.size
		if bl.state == snapshot.ActiveAllocated {
			seg.AllocatedSize += bl.size
		}
		if bl.state.Active() {
			seg.ActiveSize += bl.size
			seg.RequestedSize += bl.requested
		}
	}
	b.sn.Segments = append(b.sn.Segments, seg)
}

func TestUsage(t *testing.T) {
	b := newBuilder()
	st := b.stack
	const side = 0x7f00
	b.segment(0, 0x1000_0000, 0, snapshot.Small, snapshot.PoolID{},
		blk{512, 100, snapshot.ActiveAllocated, st},
		blk{1 * kib, 1000, snapshot.ActivePendingFree, st},
		blk{2*mib - 1536, 0, snapshot.Inactive, snapshot.EmptyStack})
	b.segment(0, 0x2000_0000, 0, snapshot.Large, snapshot.PoolID{},
		blk{20 * mib, 0, snapshot.Inactive, snapshot.EmptyStack})
	b.segment(0, 0x3000_0000, 0, snapshot.Large, snapshot.PoolID{},
		blk{26 * mib, 25 * mib, snapshot.ActiveAllocated, st})
	b.segment(0, 0x4000_0000, side, snapshot.Large, snapshot.PoolID{1, 0},
		blk{8 * mib, 8 * mib, snapshot.ActiveAllocated, st},
		blk{12 * mib, 3 * mib, snapshot.Inactive, snapshot.EmptyStack})
	b.segment(1, 0x5000_0000, 0, snapshot.Large, snapshot.PoolID{},
		blk{20 * mib, 20 * mib, snapshot.ActiveAllocated, st})

	s := Of(b.sn)
	if got := len(s.Devices); got != 2 {
		t.Fatalf("got %d devices, want 2", got)
	}
	d0 := s.Devices[0]
	want := Usage{
		ReservedBytes:           2*mib + 20*mib + 26*mib + 20*mib,
		AllocatedBytes:          512 + 26*mib + 8*mib,
		ActiveBytes:             512 + 1*kib + 26*mib + 8*mib,
		RequestedBytes:          100 + 1000 + 25*mib + 8*mib,
		Segments:                4,
		FreeSegments:            1,
		Blocks:                  7,
		AllocatedBlocks:         3,
		PendingFreeBlocks:       1,
		FreeBlocks:              3,
		InternalWasteBytes:      (512 - 100) + 1*mib,
		FreeInUsedSegmentsBytes: (2*mib - 1536) + 12*mib,
		FreeSegmentBytes:        20 * mib,
		LargestFreeBlockBytes:   20 * mib,
	}
	if d0.Usage != want {
		t.Errorf("device 0 usage\n got %+v\nwant %+v", d0.Usage, want)
	}
	if got := d0.ActiveBytes + d0.FreeBytes(); got != d0.ReservedBytes {
		t.Errorf("active + free = %d, want reserved %d", got, d0.ReservedBytes)
	}

	var keys []PoolKey
	for _, p := range d0.Pools {
		keys = append(keys, p.PoolKey)
	}
	wantKeys := []PoolKey{
		{ID: snapshot.PoolID{}, Stream: 0, Type: snapshot.Large},
		{ID: snapshot.PoolID{}, Stream: 0, Type: snapshot.Small},
		{ID: snapshot.PoolID{1, 0}, Stream: side, Type: snapshot.Large},
	}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("pools\n got %v\nwant %v", keys, wantKeys)
	}
	var sum Usage
	for _, p := range d0.Pools {
		sum.ReservedBytes += p.ReservedBytes
		sum.AllocatedBytes += p.AllocatedBytes
		sum.Segments += p.Segments
	}
	if sum.ReservedBytes != d0.ReservedBytes || sum.AllocatedBytes != d0.AllocatedBytes || sum.Segments != d0.Segments {
		t.Errorf("pools do not add up to the device: %+v vs %+v", sum, d0.Usage)
	}
	if got := d0.Pools[2].LargestFreeBlockBytes; got != 12*mib {
		t.Errorf("private pool largest free = %d, want 12 MiB", got)
	}
	if got := s.Devices[1].ReservedBytes; got != 20*mib {
		t.Errorf("device 1 reserved = %d, want 20 MiB", got)
	}
}

// kinds lists the caveat kinds in order.
func kinds(cs []Caveat) []CaveatKind {
	out := []CaveatKind{}
	for _, c := range cs {
		out = append(out, c.Kind)
	}
	return out
}

func TestEventsAndCaveats(t *testing.T) {
	const t0 = 1_795_270_260_000_000
	type ev = snapshot.Event
	alloc, freeReq, freeDone := snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted

	tests := []struct {
		name string
		// build adds segments and a device-0 trace to b.
		build      func(b *builder) []ev
		wantKinds  []CaveatKind
		wantEvents map[snapshot.Action]int
		wantSpanUS int64
	}{
		{
			name: "complete history",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
					blk{512, 100, snapshot.ActiveAllocated, b.stack},
					blk{2*mib - 512, 0, snapshot.Inactive, snapshot.EmptyStack})
				return []ev{
					{Action: snapshot.ActionSegmentAlloc, Addr: 0x1000, Size: 2 * mib, TimeUS: t0, Stack: b.stack},
					{Action: alloc, Addr: 0x1000, Size: 100, TimeUS: t0 + 10, Stack: b.stack},
					{Action: alloc, Addr: 0x1200, Size: 100, TimeUS: t0 + 20, Stack: b.stack},
					{Action: freeReq, Addr: 0x1200, Size: 100, TimeUS: t0 + 30, Stack: b.stack},
					{Action: freeDone, Addr: 0x1200, Size: 100, TimeUS: t0 + 30, Stack: b.stack},
					{Action: snapshot.ActionSnapshot, TimeUS: t0 + 1_500_000},
				}
			},
			wantKinds:  []CaveatKind{},
			wantEvents: map[snapshot.Action]int{snapshot.ActionSegmentAlloc: 1, alloc: 2, freeReq: 1, freeDone: 1, snapshot.ActionSnapshot: 1},
			wantSpanUS: 1_500_000,
		},
		{
			name: "recording off",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Large, snapshot.PoolID{},
					blk{20 * mib, 20 * mib, snapshot.ActiveAllocated, snapshot.EmptyStack})
				return nil
			},
			wantKinds:  []CaveatKind{NoTrace, NoFrames},
			wantEvents: map[snapshot.Action]int{},
		},
		{
			name: "enabled=state",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Large, snapshot.PoolID{},
					blk{20 * mib, 20 * mib, snapshot.ActiveAllocated, b.stack})
				return []ev{{Action: freeDone, Addr: 0x9000, TimeUS: t0, Stack: b.stack}}
			},
			wantKinds:  []CaveatKind{StateOnly},
			wantEvents: map[snapshot.Action]int{freeDone: 1},
		},
		{
			name: "context=None",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
					blk{2 * mib, mib, snapshot.ActiveAllocated, snapshot.EmptyStack})
				return []ev{
					{Action: snapshot.ActionSegmentAlloc, Addr: 0x1000, Size: 2 * mib, TimeUS: t0},
					{Action: alloc, Addr: 0x1000, Size: mib, TimeUS: t0 + 1},
				}
			},
			wantKinds:  []CaveatKind{NoFrames},
			wantEvents: map[snapshot.Action]int{snapshot.ActionSegmentAlloc: 1, alloc: 1},
			wantSpanUS: 1,
		},
		{
			name: "ring buffer wrapped",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
					blk{512, 100, snapshot.ActiveAllocated, b.stack}, // alloc lost
					blk{512, 100, snapshot.ActiveAllocated, b.stack},
					blk{2*mib - 1024, 0, snapshot.Inactive, snapshot.EmptyStack})
				return []ev{
					{Action: freeDone, Addr: 0x5000, TimeUS: t0, Stack: b.stack}, // its free_requested lost
					{Action: alloc, Addr: 0x1200, Size: 100, TimeUS: t0 + 5, Stack: b.stack},
				}
			},
			wantKinds:  []CaveatKind{RingWrapped},
			wantEvents: map[snapshot.Action]int{freeDone: 1, alloc: 1},
			wantSpanUS: 5,
		},
		{
			// 101 events is no max_entries anyone passes: the trace was not
			// wrapped but restarted after the first block was allocated.
			name: "history restarted",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
					blk{512, 100, snapshot.ActiveAllocated, b.stack}, // allocated before the restart
					blk{2*mib - 512, 0, snapshot.Inactive, snapshot.EmptyStack})
				events := []ev{{Action: alloc, Addr: 0x1200, Size: 100, TimeUS: t0, Stack: b.stack}}
				for i := range 50 {
					events = append(events,
						ev{Action: freeReq, Addr: 0x1200, Size: 100, TimeUS: t0 + int64(i) + 1, Stack: b.stack},
						ev{Action: freeDone, Addr: 0x1200, Size: 100, TimeUS: t0 + int64(i) + 1, Stack: b.stack})
				}
				return events
			},
			wantKinds:  []CaveatKind{HistoryRestarted},
			wantEvents: map[snapshot.Action]int{alloc: 1, freeReq: 50, freeDone: 50},
			wantSpanUS: 50,
		},
		{
			name: "allocated before recording, and backward allocations without stacks",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Large, snapshot.PoolID{},
					blk{20 * mib, 20 * mib, snapshot.ActiveAllocated, snapshot.EmptyStack}, // before recording
					blk{4 * mib, 4 * mib, snapshot.ActiveAllocated, b.stack},
					blk{2 * mib, 2 * mib, snapshot.ActiveAllocated, snapshot.EmptyStack})
				return []ev{
					{Action: alloc, Addr: 0x1000 + 20*mib, Size: 4 * mib, TimeUS: t0, Stack: b.stack},
					{Action: alloc, Addr: 0x1000 + 24*mib, Size: 2 * mib, TimeUS: t0 + 1, Stack: snapshot.EmptyStack},
					{Action: freeReq, Addr: 0x9000_0000, TimeUS: t0 + 2, Stack: b.stack}, // a pre-recording block freed
					{Action: freeDone, Addr: 0x9000_0000, TimeUS: t0 + 2, Stack: b.stack},
				}
			},
			wantKinds:  []CaveatKind{EmptyAllocStacks, PreRecording},
			wantEvents: map[snapshot.Action]int{alloc: 2, freeReq: 1, freeDone: 1},
			wantSpanUS: 2,
		},
		{
			name: "no timestamps",
			build: func(b *builder) []ev {
				b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
					blk{2 * mib, mib, snapshot.ActiveAllocated, b.stack})
				return []ev{
					{Action: snapshot.ActionSegmentAlloc, Addr: 0x1000, Size: 2 * mib, Stack: b.stack},
					{Action: alloc, Addr: 0x1000, Size: mib, Stack: b.stack},
				}
			},
			wantKinds:  []CaveatKind{NoTimestamps},
			wantEvents: map[snapshot.Action]int{snapshot.ActionSegmentAlloc: 1, alloc: 1},
		},
	}
	for _, test := range tests {
		b := newBuilder()
		if events := test.build(b); events != nil {
			b.sn.Traces = []snapshot.Trace{snapshot.NewTrace(events, nil)}
		}
		s := Of(b.sn)
		if len(s.Devices) != 1 {
			t.Errorf("%s: got %d devices, want 1", test.name, len(s.Devices))
			continue
		}
		d := s.Devices[0]
		if got := kinds(d.Caveats); !slices.Equal(got, test.wantKinds) {
			t.Errorf("%s: caveats\n got %v\nwant %v\n(%+v)", test.name, got, test.wantKinds, d.Caveats)
		}
		for _, a := range snapshot.Actions() {
			if d.Events[a] != test.wantEvents[a] {
				t.Errorf("%s: %v events = %d, want %d", test.name, a, d.Events[a], test.wantEvents[a])
			}
		}
		if got := d.LastEventUS - d.FirstEventUS; got != test.wantSpanUS {
			t.Errorf("%s: span = %dµs, want %dµs", test.name, got, test.wantSpanUS)
		}
	}
}

func TestFileCaveats(t *testing.T) {
	sn := snapshot.New()
	sn.Generation = snapshot.GenLegacyList
	sn.RequestedUnknown = 3
	sn.Unknown["top.host_segments"] = 1
	sn.Unknown["action.annotate_v2"] = 3
	got := Of(sn).Caveats
	if k := kinds(got); !slices.Equal(k, []CaveatKind{LegacyFormat, UnknownFields}) {
		t.Fatalf("got %v", k)
	}
	if got[0].Count != 3 || !strings.Contains(got[0].Message, "1.x segment list format: no requested size for 3 active blocks") {
		t.Errorf("legacy-format caveat = %+v", got[0])
	}
	if got[1].Count != 4 || !strings.Contains(got[1].Message, "action.annotate_v2, top.host_segments") {
		t.Errorf("unknown-fields caveat = %+v", got[1])
	}
}

// TestCaveatsFitTheFormat checks that a caveat names what the file's own
// torch could do: torch 2.0 had no enabled="state", and a pickled
// memory_snapshot() list holds no trace whether or not history was on.
func TestCaveatsFitTheFormat(t *testing.T) {
	for _, c := range []struct {
		name        string
		gen         snapshot.Generation
		events      []snapshot.Event
		want        CaveatKind
		say, notSay string
	}{
		{"2.0, one event", snapshot.GenHistory, []snapshot.Event{{Action: snapshot.ActionSnapshot}},
			StateOnly, "there is no history, only the final state and the stacks of live blocks; torch 2.0's _record_memory_history(True) keeps one event", `enabled="state"`},
		{"2.1+, one event", snapshot.GenModern, []snapshot.Event{{Action: snapshot.ActionSnapshot}},
			StateOnly, `enabled="state"`, "torch 2.0"},
		{"memory_snapshot() list", snapshot.GenSegmentList, nil,
			NoTrace, "torch.cuda.memory_snapshot() pickled", "not being recorded"},
		{"2.1+, no trace", snapshot.GenModern, nil,
			NoTrace, "not being recorded", "memory_snapshot()"},
	} {
		b := newBuilder()
		b.sn.Generation = c.gen
		b.segment(0, 0x1000, 0, snapshot.Large, snapshot.PoolID{},
			blk{20 * mib, 20 * mib, snapshot.ActiveAllocated, b.stack})
		if c.events != nil {
			b.sn.Traces = []snapshot.Trace{snapshot.NewTrace(c.events, nil)}
		}
		cs := Of(b.sn).Devices[0].Caveats
		if len(cs) != 1 || cs[0].Kind != c.want || !strings.Contains(cs[0].Message, c.say) || strings.Contains(cs[0].Message, c.notSay) {
			t.Errorf("%s: caveats %+v, want one %s saying %q and not %q", c.name, cs, c.want, c.say, c.notSay)
		}
	}
}

func TestPlausibleMaxEntries(t *testing.T) {
	for n, want := range map[int]bool{
		1: true, 25: true, 1000: true, 5000: true, 100_000: true, 4096: true, 1 << 20: true, 250_000: true, 750: true,
		97: false, 101: false, 7600: false, 8694: false, 19_052: false, 100_001: false, 4097: false,
	} {
		if got := plausibleMaxEntries(n); got != want {
			t.Errorf("plausibleMaxEntries(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	b := newBuilder()
	b.segment(0, 0x1000, 0x7f, snapshot.Small, snapshot.PoolID{0, 1},
		blk{2 * mib, mib, snapshot.ActiveAllocated, b.stack})
	b.sn.Traces = []snapshot.Trace{snapshot.NewTrace([]snapshot.Event{
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: mib, Stack: b.stack, TimeUS: 1},
		{Action: snapshot.ActionUnknown, TimeUS: 2},
	}, nil)}
	out, err := json.Marshal(Of(b.sn))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"events":{"unknown":1,"alloc":1,"free_requested":0,`,
		`"pools":[{"pool":[0,1],"stream":127,"type":"small","reserved_bytes":2097152,`,
		`"device":0,"reserved_bytes":2097152,"allocated_bytes":2097152,"active_bytes":2097152,"requested_bytes":1048576,"segments":1`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("JSON lacks %s\n%s", want, out)
		}
	}
}

// Torch after 2.11 says whether each device's ring buffer overflowed
// (trace_alloc_overflowed); where it does, that decides between a wrapped
// and a restarted trace, whatever the trace's length.
func TestOverflowedSaysWhichItWas(t *testing.T) {
	for _, c := range []struct {
		overflowed bool
		want       CaveatKind
		say        string
	}{
		{true, RingWrapped, "the trace ring buffer wrapped at 2 events"},
		{false, HistoryRestarted, "the ring buffer did not overflow (trace_alloc_overflowed)"},
	} {
		b := newBuilder()
		b.segment(0, 0x1000, 0, snapshot.Small, snapshot.PoolID{},
			blk{512, 100, snapshot.ActiveAllocated, b.stack}, // alloc not in the trace
			blk{2*mib - 512, 0, snapshot.Inactive, snapshot.EmptyStack})
		b.sn.Traces = []snapshot.Trace{snapshot.NewTrace([]snapshot.Event{
			{Action: snapshot.ActionAlloc, Addr: 0x9000, Size: 100, Stack: b.stack, TimeUS: 1},
			{Action: snapshot.ActionFreeRequested, Addr: 0x9000, Size: 100, Stack: b.stack, TimeUS: 2},
		}, nil)}
		b.sn.Extra = map[string]any{"trace_alloc_overflowed": []any{c.overflowed}}
		cs := Of(b.sn).Devices[0].Caveats
		if len(cs) != 1 || cs[0].Kind != c.want || !strings.Contains(cs[0].Message, c.say) {
			t.Errorf("overflowed %v: caveats %+v, want one %s saying %q", c.overflowed, cs, c.want, c.say)
		}
	}
}
