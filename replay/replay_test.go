package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

const (
	kib = uint64(1) << 10
	mib = uint64(1) << 20
	// Base addresses of hand-built segments.
	a0 = uint64(0x7f0000000000)
	b0 = uint64(0x7f0100000000)
	e0 = uint64(0x300000000) // an expandable reservation
)

// seg describes a final-snapshot segment for tests.
type seg struct {
	addr, size uint64
	typ        snapshot.SegmentType
	pool       snapshot.PoolID
	stream     int64
	expandable bool
	blocks     []blk // address order; must cover the segment
}

type blk struct {
	size, requested uint64
	state           snapshot.BlockState
}

// build makes a one-device snapshot from final segments and a trace.
func build(segs []seg, events []snapshot.Event) *snapshot.Snapshot {
	sn := snapshot.New()
	for _, s := range segs {
		out := snapshot.Segment{
			Address: s.addr, TotalSize: s.size, Type: s.typ, Pool: s.pool,
			Stream: sn.InternStream(s.stream), Expandable: s.expandable,
			Stack: snapshot.EmptyStack, FirstBlock: len(sn.Blocks), NumBlocks: len(s.blocks),
		}
		addr := s.addr
		for _, b := range s.blocks {
			sb := snapshot.Block{Address: addr, Size: b.size, RequestedSize: b.requested, State: b.state, Stack: snapshot.EmptyStack}
			if b.state.Active() {
				sb.Stack = snapshot.NoStack // hand-built events carry no stack
				out.ActiveSize += b.size
				out.RequestedSize += b.requested
			}
			if b.state == snapshot.ActiveAllocated {
				out.AllocatedSize += b.size
			}
			sn.Blocks = append(sn.Blocks, sb)
			addr += b.size
		}
		sn.Segments = append(sn.Segments, out)
	}
	for i := range events {
		events[i].TimeUS = int64(1000 + i)
	}
	sn.Traces = []snapshot.Trace{snapshot.NewTrace(events, nil)}
	return sn
}

func ev(a snapshot.Action, addr, size uint64) snapshot.Event {
	return snapshot.Event{Action: a, Addr: addr, Size: size}
}

const (
	alloc     = snapshot.ActionAlloc
	freeReq   = snapshot.ActionFreeRequested
	freeDone  = snapshot.ActionFreeCompleted
	segAlloc  = snapshot.ActionSegmentAlloc
	segFree   = snapshot.ActionSegmentFree
	segMap    = snapshot.ActionSegmentMap
	segUnmap  = snapshot.ActionSegmentUnmap
	snap      = snapshot.ActionSnapshot
	oom       = snapshot.ActionOOM
	allocated = snapshot.ActiveAllocated
	pending   = snapshot.ActivePendingFree
	inactive  = snapshot.Inactive
)

// free is a free_requested immediately completed.
func free(addr, requested uint64) []snapshot.Event {
	return []snapshot.Event{ev(freeReq, addr, requested), ev(freeDone, addr, requested)}
}

func events(groups ...any) []snapshot.Event {
	var out []snapshot.Event
	for _, g := range groups {
		switch g := g.(type) {
		case snapshot.Event:
			out = append(out, g)
		case []snapshot.Event:
			out = append(out, g...)
		}
	}
	return out
}

// layoutString renders a state as one line per segment: its range and pool,
// then each block's size in KiB, prefixed "-" when inactive and "p" when
// pending free.
func layoutString(st *State) string {
	var b strings.Builder
	for _, s := range st.Segments {
		fmt.Fprintf(&b, "%#x+%g%s", s.Address, float64(s.TotalSize)/1024, s.Pool)
		for _, blk := range st.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks] {
			k := float64(blk.Size) / 1024
			switch blk.State {
			case inactive:
				fmt.Fprintf(&b, " -%g", k)
			case pending:
				fmt.Fprintf(&b, " p%g", k)
			default:
				fmt.Fprintf(&b, " %g", k)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestReplay(t *testing.T) {
	type check struct {
		index  int
		layout string // layoutString, sizes in KiB
		sample Sample
	}
	tests := []struct {
		name    string
		final   []seg
		events  []snapshot.Event
		checks  []check
		caveats []CaveatKind
	}{{
		name:  "split and merge in a large segment",
		final: []seg{{addr: a0, size: 20 * mib, blocks: []blk{{20 * mib, 0, inactive}}}},
		events: events(
			ev(segAlloc, a0, 20*mib),
			ev(alloc, a0, 4*mib),
			ev(alloc, a0+4*mib, 2*mib),
			free(a0, 4*mib),
			// 13.5 MiB leaves 0.5 MiB: too small to split off a large block.
			ev(alloc, a0+6*mib, 13*mib+512*kib),
			free(a0+4*mib, 2*mib),
			free(a0+6*mib, 13*mib+512*kib),
		),
		checks: []check{
			{BeforeRecording, "", Sample{}},
			{0, "0x7f0000000000+20480(0,0) -20480\n", Sample{Reserved: int64(20 * mib)}},
			{2, "0x7f0000000000+20480(0,0) 4096 2048 -14336\n", Sample{Allocated: int64(6 * mib), Requested: int64(6 * mib), Active: int64(6 * mib), Reserved: int64(20 * mib)}},
			{3, "0x7f0000000000+20480(0,0) p4096 2048 -14336\n", Sample{Allocated: int64(2 * mib), Requested: int64(2 * mib), Active: int64(6 * mib), Reserved: int64(20 * mib)}},
			{4, "0x7f0000000000+20480(0,0) -4096 2048 -14336\n", Sample{Allocated: int64(2 * mib), Requested: int64(2 * mib), Active: int64(2 * mib), Reserved: int64(20 * mib)}},
			{5, "0x7f0000000000+20480(0,0) -4096 2048 14336\n", Sample{Allocated: int64(16 * mib), Requested: int64(15*mib + 512*kib), Active: int64(16 * mib), Reserved: int64(20 * mib)}},
			{7, "0x7f0000000000+20480(0,0) -6144 14336\n", Sample{Allocated: int64(14 * mib), Requested: int64(13*mib + 512*kib), Active: int64(14 * mib), Reserved: int64(20 * mib)}},
			{9, "0x7f0000000000+20480(0,0) -20480\n", Sample{Reserved: int64(20 * mib)}},
		},
	}, {
		name: "small pool rounds to 512 and splits any remainder",
		final: []seg{{addr: a0, size: 2 * mib, typ: snapshot.Small, blocks: []blk{
			{512, 100, allocated}, {1024, 1000, allocated}, {2*mib - 1536, 0, inactive},
		}}},
		events: events(
			ev(segAlloc, a0, 2*mib),
			ev(alloc, a0, 100),
			ev(alloc, a0+512, 1000),
			ev(alloc, a0+1536, 3000),
			free(a0+1536, 3000),
		),
		checks: []check{
			{3, "0x7f0000000000+2048(0,0) 0.5 1 3 -2043.5\n", Sample{Allocated: 512 + 1024 + 3072, Requested: 4100, Active: 512 + 1024 + 3072, Reserved: int64(2 * mib)}},
		},
	}, {
		name: "pending free across streams stays active until free_completed",
		final: []seg{
			{addr: a0, size: 20 * mib, blocks: []blk{{20 * mib, 0, inactive}}},
			{addr: b0, size: 20 * mib, stream: 7, blocks: []blk{{3 * mib, 3 * mib, pending}, {17 * mib, 0, inactive}}},
		},
		events: events(
			ev(segAlloc, a0, 20*mib),
			ev(alloc, a0, 4*mib),
			ev(freeReq, a0, 4*mib),
			ev(snap, 0, 4*mib),
			ev(oom, 1<<30, 1<<40),
			ev(freeDone, a0, 4*mib),
			snapshot.Event{Action: segAlloc, Addr: b0, Size: 20 * mib, Stream: 1},
			snapshot.Event{Action: alloc, Addr: b0, Size: 3 * mib, Stream: 1},
			snapshot.Event{Action: freeReq, Addr: b0, Size: 3 * mib, Stream: 1},
		),
		checks: []check{
			{2, "0x7f0000000000+20480(0,0) p4096 -16384\n", Sample{Active: int64(4 * mib), Reserved: int64(20 * mib)}},
			{4, "0x7f0000000000+20480(0,0) p4096 -16384\n", Sample{Active: int64(4 * mib), Reserved: int64(20 * mib)}},
			{5, "0x7f0000000000+20480(0,0) -20480\n", Sample{Reserved: int64(20 * mib)}},
			{8, "0x7f0000000000+20480(0,0) -20480\n0x7f0100000000+20480(0,0) p3072 -17408\n", Sample{Active: int64(3 * mib), Reserved: int64(40 * mib)}},
		},
	}, {
		name: "expandable map grows one segment, unmap splits it",
		final: []seg{
			{addr: e0, size: 20 * mib, expandable: true, blocks: []blk{{20 * mib, 20 * mib, allocated}}},
			{addr: e0 + 40*mib, size: 20 * mib, expandable: true, blocks: []blk{{20 * mib, 20 * mib, allocated}}},
		},
		events: events(
			ev(segMap, e0, 20*mib),
			ev(alloc, e0, 20*mib),
			ev(segMap, e0+20*mib, 20*mib),
			// Crosses the old end of the mapping: the free tail merged with
			// the newly mapped pages.
			ev(alloc, e0+20*mib, 10*mib),
			ev(segMap, e0+40*mib, 20*mib),
			ev(alloc, e0+30*mib, 10*mib),
			ev(alloc, e0+40*mib, 20*mib),
			free(e0+20*mib, 10*mib),
			free(e0+30*mib, 10*mib),
			ev(segUnmap, e0+20*mib, 20*mib),
		),
		checks: []check{
			{3, "0x300000000+40960(0,0) 20480 10240 -10240\n", Sample{Allocated: int64(30 * mib), Requested: int64(30 * mib), Active: int64(30 * mib), Reserved: int64(40 * mib)}},
			{10, "0x300000000+61440(0,0) 20480 -20480 20480\n", Sample{Allocated: int64(40 * mib), Requested: int64(40 * mib), Active: int64(40 * mib), Reserved: int64(60 * mib)}},
			{11, "0x300000000+20480(0,0) 20480\n0x302800000+20480(0,0) 20480\n", Sample{Allocated: int64(40 * mib), Requested: int64(40 * mib), Active: int64(40 * mib), Reserved: int64(40 * mib)}},
		},
	}, {
		name: "blocks and segments from before recording",
		final: []seg{
			{addr: a0, size: 20 * mib, blocks: []blk{{3 * mib, 3 * mib, allocated}, {17 * mib, 0, inactive}}},
		},
		events: events(
			// Freed before any alloc: allocated before recording. 1 MiB + 1
			// rounds to 1 MiB + 512, and the next live block follows it.
			free(a0+3*mib, mib+1),
			// Its free_requested fell off the ring buffer.
			ev(freeDone, a0+4*mib+512, 2*mib),
			ev(freeReq, a0+8*mib, 2*mib), // exists only to prove free_requested is recorded
			ev(freeDone, a0+8*mib, 2*mib),
			ev(segFree, b0, 2*mib),
		),
		checks: []check{
			{BeforeRecording, "0x7f0000000000+20480(0,0) 3072 1024.5 p2048 -2047.5 2048 -10240\n0x7f0100000000+2048(0,0) -2048\n",
				Sample{Allocated: int64(3*mib+mib+512) + int64(2*mib), Requested: int64(3*mib+mib+1) + int64(2*mib), Active: int64(8*mib + 512), Reserved: int64(22 * mib)}},
			{1, "0x7f0000000000+20480(0,0) 3072 -1024.5 p2048 -2047.5 2048 -10240\n0x7f0100000000+2048(0,0) -2048\n",
				Sample{Allocated: int64(5 * mib), Requested: int64(5 * mib), Active: int64(7 * mib), Reserved: int64(22 * mib)}},
			{5, "0x7f0000000000+20480(0,0) 3072 -17408\n", Sample{Allocated: int64(3 * mib), Requested: int64(3 * mib), Active: int64(3 * mib), Reserved: int64(20 * mib)}},
		},
		caveats: []CaveatKind{BlocksBeforeRecording, FreesWithoutAlloc, RingWrapped, SegmentsBeforeRecording},
	}, {
		name: "private pools",
		final: []seg{
			{addr: a0, size: 20 * mib, blocks: []blk{{4 * mib, 4 * mib, allocated}, {16 * mib, 0, inactive}}},
			{addr: b0, size: 20 * mib, pool: snapshot.PoolID{1, 0}, blocks: []blk{{4 * mib, 0, inactive}, {4 * mib, 4 * mib, allocated}, {12 * mib, 0, inactive}}},
		},
		events: events(
			ev(segAlloc, a0, 20*mib),
			ev(alloc, a0, 4*mib),
			ev(segAlloc, b0, 20*mib),
			ev(alloc, b0, 4*mib),
			ev(alloc, b0+4*mib, 4*mib),
			free(b0, 4*mib),
		),
		checks: []check{
			{4, "0x7f0000000000+20480(0,0) 4096 -16384\n0x7f0100000000+20480(1,0) 4096 4096 -12288\n", Sample{Allocated: int64(12 * mib), Requested: int64(12 * mib), Active: int64(12 * mib), Reserved: int64(40 * mib)}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn := build(tt.final, tt.events)
			tl, err := Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkFinal(t, sn, tl)
			checkStatesMatchSeries(t, tl)
			for _, c := range tt.checks {
				st, err := tl.State(c.index)
				if err != nil {
					t.Fatal(err)
				}
				if got := layoutString(st); got != c.layout {
					t.Errorf("state after event %d:\n%s\nwant:\n%s", c.index, got, c.layout)
				}
				if got := tl.At(c.index); got != c.sample {
					t.Errorf("sample after event %d: %+v, want %+v", c.index, got, c.sample)
				}
			}
			var kinds []CaveatKind
			for _, c := range tl.Caveats {
				kinds = append(kinds, c.Kind)
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tt.caveats) {
				t.Errorf("caveats %v, want %v", tl.Caveats, tt.caveats)
			}
		})
	}
}
