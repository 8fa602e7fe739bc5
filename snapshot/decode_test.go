package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func readFixture(t testing.TB, path string) *Snapshot {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sn, err := Read(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sn
}

// fixtureWant holds values read from each fixture with Python's own
// pickle.load (see testdata/format/README.md for how each was made).
type fixtureWant struct {
	protocol                               int
	segments, blocks, events, frames, anns int
	reserved, allocated, active, requested uint64
	actions                                map[Action]int
	streams                                int
	pools                                  []PoolID
	expandable                             int    // segments with is_expandable
	firstStack                             string // first event with frames: action, innermost frame name, file base, line
	userMetadata, compileContext           string
	oomSize, oomDeviceFree                 uint64
	unknownLine                            bool // a frame with line 2**64-1
	conf                                   string
	pending                                int // blocks in active_pending_free
}

var fixtures = map[string]fixtureWant{
	"compile.pickle": {protocol: 4, segments: 3, blocks: 7, events: 168, frames: 239,
		reserved: 85983232, allocated: 41943040, active: 41943040, requested: 41943040,
		actions: map[Action]int{ActionSegmentAlloc: 3, ActionAlloc: 57, ActionFreeRequested: 54, ActionFreeCompleted: 54},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "segment_alloc torch::unwind::unwind() ?? 0",
		compileContext: "Torch-Compiled Region: 0/0", unknownLine: true},
	"cpp_pickled.pickle": {protocol: 2, segments: 9, blocks: 29, events: 56, frames: 10, anns: 2,
		reserved: 234881024, allocated: 201852928, active: 201852928, requested: 199755339,
		actions: map[Action]int{ActionSegmentAlloc: 9, ActionAlloc: 27, ActionFreeRequested: 9, ActionFreeCompleted: 9, ActionSnapshot: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "segment_alloc workload gen.py 15",
		userMetadata: "phase=train;step=1", oomSize: 1000000000000000, oomDeviceFree: 149083521024},
	"default.pickle": {protocol: 4, segments: 9, blocks: 29, events: 56, frames: 80, anns: 2,
		reserved: 234881024, allocated: 201852928, active: 201852928, requested: 199755339,
		actions: map[Action]int{ActionSegmentAlloc: 9, ActionAlloc: 27, ActionFreeRequested: 9, ActionFreeCompleted: 9, ActionSnapshot: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "segment_alloc torch::unwind::unwind() ?? 0",
		userMetadata: "phase=train;step=1", oomSize: 1000000000000000, oomDeviceFree: 149083521024},
	"expandable.pickle": {protocol: 4, segments: 2, blocks: 28, events: 55, frames: 80, anns: 2,
		reserved: 216006656, allocated: 199755776, active: 199755776, requested: 199755339,
		actions: map[Action]int{ActionSegmentMap: 8, ActionAlloc: 27, ActionFreeRequested: 9, ActionFreeCompleted: 9, ActionSnapshot: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, expandable: 2, firstStack: "segment_map torch::unwind::unwind() ?? 0",
		userMetadata: "phase=train;step=1", oomSize: 1000000000000000, oomDeviceFree: 149102395392, conf: "expandable_segments:True"},
	"fragoom.pickle": {protocol: 4, segments: 55, blocks: 55, events: 233, frames: 39,
		reserved: 2076180480, allocated: 2076180480, active: 2076180480, requested: 2076180480,
		actions: map[Action]int{ActionSegmentAlloc: 56, ActionAlloc: 95, ActionFreeRequested: 40, ActionFreeCompleted: 40, ActionSegmentFree: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "segment_alloc torch::unwind::unwind() ?? 0",
		oomSize: 104857600, oomDeviceFree: 147481296896},
	"fragoom_expandable.pickle": {protocol: 4, segments: 1, blocks: 57, events: 217, frames: 39,
		reserved: 2097152000, allocated: 2076180480, active: 2076180480, requested: 2076180480,
		actions: map[Action]int{ActionSegmentMap: 40, ActionAlloc: 95, ActionFreeRequested: 40, ActionFreeCompleted: 40, ActionSegmentUnmap: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, expandable: 1, firstStack: "segment_map torch::unwind::unwind() ?? 0",
		oomSize: 104857600, oomDeviceFree: 147460325376, conf: "expandable_segments:True"},
	"graphs_pools.pickle": {protocol: 4, segments: 5, blocks: 11, events: 19, frames: 86,
		reserved: 85983232, allocated: 11535360, active: 11535360, requested: 11534352,
		actions: map[Action]int{ActionSegmentAlloc: 5, ActionAlloc: 8, ActionFreeRequested: 3, ActionFreeCompleted: 3},
		streams: 3, pools: []PoolID{{0, 0}, {0, 1}, {1, 0}}, firstStack: "segment_alloc torch::unwind::unwind() ?? 0"},
	"nocontext.pickle": {protocol: 4, segments: 9, blocks: 29, events: 56, frames: 0, anns: 2,
		reserved: 234881024, allocated: 201852928, active: 201852928, requested: 199755339,
		actions: map[Action]int{ActionSegmentAlloc: 9, ActionAlloc: 27, ActionFreeRequested: 9, ActionFreeCompleted: 9, ActionSnapshot: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, userMetadata: "phase=train;step=1", oomSize: 1000000000000000, oomDeviceFree: 149083521024},
	"pending.pickle": {protocol: 4, segments: 3, blocks: 5, events: 9, frames: 39,
		reserved: 44040192, allocated: 4194304, active: 4194304, requested: 4194304,
		actions: map[Action]int{ActionSegmentAlloc: 3, ActionAlloc: 3, ActionFreeRequested: 1, ActionSnapshot: 1, ActionFreeCompleted: 1},
		streams: 2, pools: []PoolID{{0, 0}}, firstStack: "segment_alloc torch::unwind::unwind() ?? 0"},
	"prehistory.pickle": {protocol: 4, segments: 1, blocks: 5, events: 3, frames: 37,
		reserved: 20971520, allocated: 13631488, active: 13631488, requested: 13631488,
		actions: map[Action]int{ActionFreeRequested: 1, ActionFreeCompleted: 1, ActionAlloc: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "free_requested torch::unwind::unwind() ?? 0"},
	"ring.pickle": {protocol: 4, segments: 9, blocks: 29, events: 25, frames: 70, anns: 2,
		reserved: 234881024, allocated: 201852928, active: 201852928, requested: 199755339,
		actions: map[Action]int{ActionAlloc: 6, ActionSegmentAlloc: 1, ActionFreeRequested: 8, ActionFreeCompleted: 8, ActionSnapshot: 1, ActionOOM: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "alloc torch::unwind::unwind() ?? 0",
		oomSize: 1000000000000000, oomDeviceFree: 149083521024},
	"state_only.pickle": {protocol: 4, segments: 9, blocks: 29, events: 1, frames: 65, anns: 1,
		reserved: 234881024, allocated: 201852928, active: 201852928, requested: 199755339,
		actions: map[Action]int{ActionFreeCompleted: 1},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "free_completed torch::unwind::unwind() ?? 0"},
	"train.pickle": {protocol: 4, segments: 16, blocks: 27, events: 135, frames: 29, anns: 16,
		reserved: 257949696, allocated: 181465600, active: 181465600, requested: 181465092,
		actions: map[Action]int{ActionAlloc: 51, ActionSegmentAlloc: 14, ActionFreeRequested: 35, ActionFreeCompleted: 35},
		streams: 1, pools: []PoolID{{0, 0}}, firstStack: "alloc <lambda> module.py 1097"},
	"unmap.pickle": {protocol: 4, segments: 2, blocks: 5, events: 23, frames: 43,
		reserved: 104857600, allocated: 104857600, active: 104857600, requested: 104857600,
		actions: map[Action]int{ActionSegmentMap: 8, ActionAlloc: 8, ActionFreeRequested: 3, ActionFreeCompleted: 3, ActionSegmentUnmap: 1},
		streams: 1, pools: []PoolID{{0, 0}}, expandable: 2, firstStack: "segment_map torch::unwind::unwind() ?? 0",
		conf: "expandable_segments:True"},
}

func TestFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/format/*.pickle")
	if len(files) != len(fixtures) {
		t.Fatalf("found %d fixtures, want %d", len(files), len(fixtures))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			want, ok := fixtures[name]
			if !ok {
				t.Fatalf("no expectations for %s", name)
			}
			checkFixture(t, readFixture(t, path), want)
		})
	}
}

func checkFixture(t *testing.T, sn *Snapshot, want fixtureWant) {
	t.Helper()
	if sn.Protocol != want.protocol {
		t.Errorf("protocol = %d, want %d", sn.Protocol, want.protocol)
	}
	if sn.Generation != GenModern {
		t.Errorf("generation = %v, want 2.1+", sn.Generation)
	}
	if len(sn.Segments) != want.segments || len(sn.Blocks) != want.blocks {
		t.Errorf("segments, blocks = %d, %d; want %d, %d", len(sn.Segments), len(sn.Blocks), want.segments, want.blocks)
	}
	if len(sn.Frames) != want.frames {
		t.Errorf("unique frames = %d, want %d", len(sn.Frames), want.frames)
	}
	if len(sn.Annotations) != want.anns {
		t.Errorf("annotations = %d, want %d", len(sn.Annotations), want.anns)
	}
	var res, alloc, active, req uint64
	pools := map[PoolID]bool{}
	streams := map[StreamID]bool{}
	expandable := 0
	for i := range sn.Segments {
		s := &sn.Segments[i]
		res += s.TotalSize
		alloc += s.AllocatedSize
		active += s.ActiveSize
		req += s.RequestedSize
		pools[s.Pool] = true
		streams[s.Stream] = true
		if s.Expandable {
			expandable++
		}
		// The segment fields are torch's own sums of its blocks.
		var sum, sumAlloc uint64
		for _, b := range sn.SegmentBlocks(s) {
			sum += b.Size
			if b.State == ActiveAllocated {
				sumAlloc += b.Size
			}
		}
		if sum != s.TotalSize || sumAlloc != s.AllocatedSize {
			t.Errorf("segment %d: blocks sum to %d (%d allocated), segment says %d (%d)", i, sum, sumAlloc, s.TotalSize, s.AllocatedSize)
		}
		if blocks := sn.SegmentBlocks(s); len(blocks) > 0 && blocks[0].Address != s.Address {
			t.Errorf("segment %d: first block at %#x, segment at %#x", i, blocks[0].Address, s.Address)
		}
	}
	if res != want.reserved || alloc != want.allocated || active != want.active || req != want.requested {
		t.Errorf("reserved/allocated/active/requested = %d/%d/%d/%d, want %d/%d/%d/%d",
			res, alloc, active, req, want.reserved, want.allocated, want.active, want.requested)
	}
	if len(pools) != len(want.pools) {
		t.Errorf("pools = %v, want %v", pools, want.pools)
	}
	for _, p := range want.pools {
		if !pools[p] {
			t.Errorf("pool %v missing", p)
		}
	}
	if len(streams) != want.streams {
		t.Errorf("segment streams = %d, want %d", len(streams), want.streams)
	}
	if expandable != want.expandable {
		t.Errorf("expandable segments = %d, want %d", expandable, want.expandable)
	}
	if want.conf != "" || sn.Settings == nil {
		if sn.Settings == nil || sn.Settings.Conf != want.conf {
			t.Errorf("settings = %+v, want conf %q", sn.Settings, want.conf)
		}
	}
	if sn.Settings.MaxSplitSize != -1 {
		t.Errorf("max_split_size = %d, want -1 (unlimited)", sn.Settings.MaxSplitSize)
	}
	if len(sn.Traces) != 1 {
		t.Fatalf("traces = %d, want 1 device", len(sn.Traces))
	}
	tr := sn.Traces[0]
	if tr.Len() != want.events {
		t.Errorf("events = %d, want %d", tr.Len(), want.events)
	}
	actions := map[Action]int{}
	first, metas, ctxs := "", map[string]bool{}, map[string]bool{}
	var oom *Event
	var prevTime int64
	for i, e := range tr.All() {
		actions[e.Action]++
		if first == "" && len(sn.Stack(e.Stack)) > 0 {
			f := sn.Frames[sn.Stack(e.Stack)[0]]
			first = strings.Join([]string{e.Action.String(), f.Name, filepath.Base(f.Filename), itoa(f.Line)}, " ")
		}
		metas[sn.String(tr.Context(i).UserMetadata)] = true
		ctxs[sn.String(tr.Context(i).CompileContext)] = true
		if e.Action == ActionOOM {
			oom = &e
		}
		if e.TimeUS < prevTime {
			t.Errorf("event %d: time goes back (%d < %d)", i, e.TimeUS, prevTime)
		}
		prevTime = e.TimeUS
		if want.frames == 0 && e.Stack != NoStack {
			t.Errorf("event %d has stack %d in a context=None file", i, e.Stack)
		}
	}
	if len(actions) != len(want.actions) {
		t.Errorf("actions = %v, want %v", actions, want.actions)
	}
	for a, n := range want.actions {
		if actions[a] != n {
			t.Errorf("%v events = %d, want %d", a, actions[a], n)
		}
	}
	if first != want.firstStack {
		t.Errorf("first stack = %q, want %q", first, want.firstStack)
	}
	if want.userMetadata != "" && !metas[want.userMetadata] {
		t.Errorf("user_metadata %q not found in %v", want.userMetadata, metas)
	}
	if want.compileContext != "" && !ctxs[want.compileContext] {
		t.Errorf("compile_context %q not found in %v", want.compileContext, ctxs)
	}
	if want.oomSize != 0 {
		if oom == nil || oom.Size != want.oomSize || oom.Addr != want.oomDeviceFree {
			t.Errorf("oom = %+v, want size %d device_free %d", oom, want.oomSize, want.oomDeviceFree)
		}
	}
	unknownLine := false
	for _, f := range sn.Frames {
		if f.Line == UnknownLine {
			unknownLine = true
		}
	}
	if unknownLine != want.unknownLine {
		t.Errorf("frame with line 2**64-1: %v, want %v", unknownLine, want.unknownLine)
	}
	if len(sn.Unknown) != 0 {
		t.Errorf("unknown keys in a 2.11 file: %v", sn.Unknown)
	}
}

func itoa(u uint64) string {
	if u == UnknownLine {
		return "?"
	}
	return strconv.FormatUint(u, 10)
}

// Specific records the fixtures are known to hold.
func TestFixtureDetails(t *testing.T) {
	t.Run("pending free stays active", func(t *testing.T) {
		sn := readFixture(t, "testdata/format/pending.pickle")
		// The trace has free_requested before a later free_completed.
		var req, done int = -1, -1
		for i, e := range sn.Traces[0].All() {
			switch e.Action {
			case ActionFreeRequested:
				req = i
			case ActionFreeCompleted:
				done = i
			}
		}
		if req < 0 || done <= req+1 {
			t.Errorf("free_requested at %d, free_completed at %d: want a delayed completion", req, done)
		}
		if sn.Stream(sn.Traces[0].At(req).Stream) == 0 && sn.Stream(sn.Segments[len(sn.Segments)-1].Stream) == 0 {
			t.Errorf("want a side stream in the record_stream fixture")
		}
	})
	t.Run("graph and mempool pools", func(t *testing.T) {
		sn := readFixture(t, "testdata/format/graphs_pools.pickle")
		private := 0
		for _, s := range sn.Segments {
			if !s.Pool.IsDefault() {
				private++
			}
		}
		if private == 0 {
			t.Error("no private-pool segments")
		}
	})
	t.Run("annotations", func(t *testing.T) {
		sn := readFixture(t, "testdata/format/train.pickle")
		a := sn.Annotations[0]
		if a.Stage != "START" || a.Name != "## forward ##" || a.Device != 0 || a.TimeUS < 1.7e15 {
			t.Errorf("first annotation = %+v", a)
		}
		found := false
		for _, a := range sn.Annotations {
			if strings.HasPrefix(a.Name, "Optimizer.step#") {
				found = true
			}
		}
		if !found {
			t.Error("no Optimizer.step annotation in train.pickle")
		}
	})
	t.Run("backward allocs have empty stacks", func(t *testing.T) {
		sn := readFixture(t, "testdata/format/train.pickle")
		empty := 0
		for _, e := range sn.Traces[0].All() {
			if e.Action == ActionAlloc && e.Stack == EmptyStack {
				empty++
			}
		}
		if empty != 17 { // 17 of 51 allocs, per the research note
			t.Errorf("allocs with frames: [] = %d, want 17", empty)
		}
	})
	t.Run("prehistory blocks have no frames", func(t *testing.T) {
		sn := readFixture(t, "testdata/format/prehistory.pickle")
		n := 0
		for _, b := range sn.Blocks {
			if b.State == ActiveAllocated && b.Stack == EmptyStack {
				n++
			}
		}
		if n == 0 {
			t.Error("no active block without frames")
		}
	})
}

// Re-dumps of default.pickle with protocols 0-3 (Python's pickle.dump,
// gzip-compressed), protocol 5 (same bytes but the PROTO byte), and
// compressed copies must decode to the same model.
func TestProtocolsAndCompression(t *testing.T) {
	base := readFixture(t, "testdata/format/default.pickle")
	for _, p := range []string{"p0", "p1", "p2", "p3"} {
		t.Run(p, func(t *testing.T) {
			sn := readFixture(t, "testdata/redump/default_"+p+".pickle.gz")
			want := fixtures["default.pickle"]
			want.protocol = int(p[1] - '0')
			if want.protocol < 2 {
				want.protocol = 0 // PROTO exists since protocol 2
			}
			checkFixture(t, sn, want)
			sameModel(t, base, sn)
		})
	}
	t.Run("p5", func(t *testing.T) {
		raw, err := os.ReadFile("testdata/format/default.pickle")
		if err != nil {
			t.Fatal(err)
		}
		raw[1] = 5
		sn, err := Read(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		want := fixtures["default.pickle"]
		want.protocol = 5
		checkFixture(t, sn, want)
	})
	for _, c := range []struct{ file, fixture string }{
		{"redump/train.pickle.zst", "train.pickle"},
		{"redump/train.pzstd.pickle.zst", "train.pickle"}, // pzstd 1.5.4: a skippable frame first
		{"redump/ring.pickle.gz", "ring.pickle"},
	} {
		t.Run(c.file, func(t *testing.T) {
			checkFixture(t, readFixture(t, "testdata/"+c.file), fixtures[c.fixture])
		})
	}
}

// sameModel compares two decodes record by record.
func sameModel(t *testing.T, a, b *Snapshot) {
	t.Helper()
	if len(a.Segments) != len(b.Segments) || len(a.Blocks) != len(b.Blocks) {
		t.Fatalf("shapes differ")
	}
	for i := range a.Blocks {
		x, y := a.Blocks[i], b.Blocks[i]
		if x.Address != y.Address || x.Size != y.Size || x.RequestedSize != y.RequestedSize || x.State != y.State ||
			!sameStack(a, b, x.Stack, y.Stack) {
			t.Errorf("block %d: %+v vs %+v", i, x, y)
		}
	}
	ta, tb := a.Traces[0], b.Traces[0]
	for i := 0; i < ta.Len(); i++ {
		x, y := ta.At(i), tb.At(i)
		if x.Action != y.Action || x.Addr != y.Addr || x.Size != y.Size || x.TimeUS != y.TimeUS ||
			a.String(ta.Context(i).UserMetadata) != b.String(tb.Context(i).UserMetadata) || !sameStack(a, b, x.Stack, y.Stack) {
			t.Errorf("event %d: %+v vs %+v", i, x, y)
		}
	}
}

func sameStack(a, b *Snapshot, x, y StackID) bool {
	fx, fy := a.Stack(x), b.Stack(y)
	if (x == NoStack) != (y == NoStack) || len(fx) != len(fy) {
		return false
	}
	for i := range fx {
		if a.Frames[fx[i]] != b.Frames[fy[i]] {
			return false
		}
	}
	return true
}

// Files in the torch 1.x and 2.0 layouts (default.pickle rewritten into
// them: testdata/legacy/README.md) decode to the same segments and blocks,
// with addresses derived from segment offsets and requested sizes and
// stacks taken from block history where the layout has it.
func TestLegacyLayouts(t *testing.T) {
	base := readFixture(t, "testdata/format/default.pickle")
	for _, c := range []struct {
		file    string
		gen     Generation
		history bool
		events  int
	}{
		{"v1_12_list.pickle", GenLegacyList, false, 0},
		{"v1_13_list.pickle", GenLegacyList, true, 0},
		{"v2_0_history.pickle", GenHistory, true, 56},
	} {
		t.Run(c.file, func(t *testing.T) {
			sn := readFixture(t, "testdata/legacy/"+c.file)
			if sn.Generation != c.gen || sn.Protocol != 2 {
				t.Errorf("generation, protocol = %v, %d; want %v, 2", sn.Generation, sn.Protocol, c.gen)
			}
			if len(sn.Segments) != len(base.Segments) || len(sn.Blocks) != len(base.Blocks) {
				t.Fatalf("segments, blocks = %d, %d", len(sn.Segments), len(sn.Blocks))
			}
			var requested uint64
			for i := range sn.Segments {
				s, bs := &sn.Segments[i], &base.Segments[i]
				if s.Address != bs.Address || s.TotalSize != bs.TotalSize || s.AllocatedSize != bs.AllocatedSize || s.Type != bs.Type {
					t.Errorf("segment %d: %+v, want %+v", i, *s, *bs)
				}
				requested += s.RequestedSize
				for j, b := range sn.SegmentBlocks(s) {
					want := base.SegmentBlocks(bs)[j]
					if b.Address != want.Address || b.Size != want.Size || b.State != want.State {
						t.Errorf("segment %d block %d: %+v, want %+v", i, j, b, want)
					}
					if !b.State.Active() {
						continue
					}
					if c.history {
						if b.RequestedSize != want.RequestedSize || len(sn.Stack(b.Stack)) == 0 ||
							sn.Frames[sn.Stack(b.Stack)[0]].Name != "workload" {
							t.Errorf("segment %d block %d: requested %d, stack %v; want %d from workload",
								i, j, b.RequestedSize, sn.Stack(b.Stack), want.RequestedSize)
						}
					} else if b.RequestedSize != b.Size || b.Stack != NoStack {
						t.Errorf("segment %d block %d: requested %d, stack %d; want the block size and no stack", i, j, b.RequestedSize, b.Stack)
					}
				}
			}
			wantRequested, wantUnknown := uint64(199755339), 0 // torch's requested_bytes
			if !c.history {
				wantRequested, wantUnknown = 201852928, 18 // without history, the sizes of the 18 active blocks
			}
			if requested != wantRequested || sn.RequestedUnknown != wantUnknown {
				t.Errorf("requested = %d with %d blocks unknown, want %d with %d", requested, sn.RequestedUnknown, wantRequested, wantUnknown)
			}
			n := 0
			for _, tr := range sn.Traces {
				n += tr.Len()
			}
			if n != c.events {
				t.Fatalf("events = %d, want %d", n, c.events)
			}
			if c.events == 0 {
				return
			}
			// 2.0 C++ frames come first (innermost), then the Python ones:
			// as many frames as the 2.11 stack had.
			e, be := sn.Traces[0].At(1), base.Traces[0].At(1)
			got := sn.Stack(e.Stack)
			if e.Action != ActionAlloc || len(got) != len(base.Stack(be.Stack)) ||
				sn.Frames[got[0]].Name != "torch::unwind::unwind()" || e.TimeUS != 0 {
				t.Errorf("event 1: %+v with %d frames, first %q", e, len(got), sn.Frames[got[0]].Name)
			}
		})
	}
}

// The torch 2.0 layout, as torch 2.0 wrote it (make_v2_0.py builds it by
// hand: torch 2.11 on the GPU machine cannot write it). Blocks carry
// requested_size and history but no address; an active block's stack is
// its newest history entry (history[0]), never an older one, and a free
// block gets none.
func TestTorch20Layout(t *testing.T) {
	sn := readFixture(t, "testdata/legacy/v2_0.pickle")
	if sn.Generation != GenHistory || sn.Generation.String() != "2.0" || sn.Protocol != 4 {
		t.Errorf("generation, protocol = %q, %d; want 2.0, 4", sn.Generation, sn.Protocol)
	}
	if sn.RequestedUnknown != 0 {
		t.Errorf("RequestedUnknown = %d, want 0: every active block carries requested_size", sn.RequestedUnknown)
	}
	const large, small, mib = 0x7F5FC0000000, 0x7F5FC2000000, 1 << 20
	want := []struct {
		addr, size, requested uint64
		state                 BlockState
		top                   string // innermost frame of the stack; "" for none
	}{
		{large, 8 * mib, 8*mib - 600, ActiveAllocated, "make_weights"},
		{large + 8*mib, 12 * mib, 2 * mib, Inactive, ""},
		{small, 512, 96, ActiveAllocated, "linear"},
		{small + 512, 1024, 1000, ActiveAllocated, ""},
		{small + 1536, 2*mib - 1536, 0, Inactive, ""},
	}
	if len(sn.Blocks) != len(want) {
		t.Fatalf("%d blocks, want %d", len(sn.Blocks), len(want))
	}
	for i, w := range want {
		b := sn.Blocks[i]
		top := ""
		if st := sn.Stack(b.Stack); len(st) > 0 {
			top = sn.Frames[st[0]].Name
		}
		if b.Address != w.addr || b.Size != w.size || b.RequestedSize != w.requested || b.State != w.state || top != w.top {
			t.Errorf("block %d: %+v from %q; want %+v", i, b, top, w)
		}
	}
	if got := sn.Segments[0].RequestedSize + sn.Segments[1].RequestedSize; got != 8*mib-600+1096 {
		t.Errorf("requested = %d, want the segments' own requested_size", got)
	}
	if sn.Traces[0].Len() != 1 || sn.Traces[0].At(0).Action != ActionSnapshot {
		t.Errorf("trace: %d events", sn.Traces[0].Len())
	}
}

// torch.cuda.memory_snapshot() pickled by hand is a bare list, like a 1.x
// file, but its blocks are 2.1+ blocks: real requested sizes and stacks.
func TestSegmentList(t *testing.T) {
	base := readFixture(t, "testdata/format/default.pickle")
	sn := readFixture(t, "testdata/legacy/v2_11_segment_list.pickle")
	if sn.Generation != GenSegmentList || !sn.Generation.List() || sn.RequestedUnknown != 0 || len(sn.Traces) != 0 {
		t.Errorf("generation %q, RequestedUnknown %d, %d traces; want a segment list with nothing derived and no trace",
			sn.Generation, sn.RequestedUnknown, len(sn.Traces))
	}
	if len(sn.Blocks) != len(base.Blocks) {
		t.Fatalf("%d blocks, want %d", len(sn.Blocks), len(base.Blocks))
	}
	for i, b := range sn.Blocks {
		w := base.Blocks[i]
		if b.Address != w.Address || b.RequestedSize != w.RequestedSize || len(sn.Stack(b.Stack)) != len(base.Stack(w.Stack)) {
			t.Errorf("block %d: %+v, want %+v", i, b, w)
		}
	}
}

// Keys and actions torch added after 2.11 (pool_id and internal_metadata on
// trace entries, the annotate action, user_metadata on blocks,
// trace_alloc_* and host_* at the top) are counted and kept, never fatal;
// the rest of the file decodes as before.
func TestNewerKeysTolerated(t *testing.T) {
	sn := readFixture(t, "testdata/newer/default_newer.pickle")
	if sn.Protocol != 5 {
		t.Errorf("protocol = %d, want 5", sn.Protocol)
	}
	want := map[string]int{
		"event.pool_id": 57, "event.internal_metadata": 57, "block.user_metadata": 29,
		"top.trace_alloc_max_entries": 1, "top.trace_alloc_overflowed": 1,
		"top.host_segments": 1, "top.host_traces": 1,
	}
	for k, n := range want {
		if sn.Unknown[k] != n {
			t.Errorf("Unknown[%q] = %d, want %d (all: %v)", k, sn.Unknown[k], n, sn.Unknown)
		}
	}
	if got := sn.Extra["trace_alloc_overflowed"]; fmt.Sprint(got) != "[false]" {
		t.Errorf("Extra[trace_alloc_overflowed] = %v", got)
	}
	tr := sn.Traces[0]
	last := tr.At(tr.Len() - 1)
	if tr.Len() != 57 || last.Action != ActionAnnotate || sn.String(tr.Context(tr.Len()-1).UserMetadata) != `{"saved_by": "autograd"}` {
		t.Errorf("last of %d events: %+v", tr.Len(), last)
	}
	base := fixtures["default.pickle"]
	var res, alloc uint64
	for _, s := range sn.Segments {
		res, alloc = res+s.TotalSize, alloc+s.AllocatedSize
	}
	if res != base.reserved || alloc != base.allocated {
		t.Errorf("reserved, allocated = %d, %d; want %d, %d", res, alloc, base.reserved, base.allocated)
	}
}
