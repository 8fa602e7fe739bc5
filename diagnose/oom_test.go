package diagnose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/memlog"
	"github.com/vramscope/vramscope/snapshot"
)

func TestSegmentSize(t *testing.T) {
	tests := []struct {
		rounded uint64
		class   snapshot.SegmentType
		segment uint64
	}{
		{512, snapshot.Small, 2 << 20},
		{1 << 20, snapshot.Small, 2 << 20},
		{1<<20 + 512, snapshot.Large, 20 << 20},
		{10<<20 - 512, snapshot.Large, 20 << 20},
		{10 << 20, snapshot.Large, 10 << 20},
		{25 << 20, snapshot.Large, 26 << 20},
		{629145600, snapshot.Large, 629145600},
	}
	for _, tt := range tests {
		if c, s := SizeClass(tt.rounded), SegmentSize(tt.rounded); c != tt.class || s != tt.segment {
			t.Errorf("%d: %v pool, %d segment; want %v, %d", tt.rounded, c, s, tt.class, tt.segment)
		}
	}
}

// within reports whether got matches a size torch printed with two
// decimals (memlog's precision: half a unit of the last decimal).
func within(got int64, printed units.Bytes) bool {
	tol := int64(units.GiB) * 512 / 100 / 1024 // 5.12 MiB
	d := got - int64(printed)
	return d <= tol && d >= -tol
}

func readMessage(t *testing.T, path string) memlog.OOMMessage {
	t.Helper()
	f, err := os.Open(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := memlog.ParseOOMMessages(f)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	return msgs[0]
}

// TestOOMFragOOM explains frag_oom's failure and checks it against torch's
// own message for the same failure.
func TestOOMFragOOM(t *testing.T) {
	fx := loadFixture(t, scenarios+"frag_oom/frag_oom.pickle.gz")
	msg := readMessage(t, scenarios+"frag_oom/oom_message.txt")
	rs, err := OOMs(fx.sn, fx.tl, fx.f)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d OOM reports, %v; want 1", len(rs), err)
	}
	r := rs[0]
	if r.Request != 629145600 || r.Rounded != 629145600 || r.SegmentSize != 629145600 || r.Class != snapshot.Large {
		t.Errorf("request %d rounded %d segment %d %v; want 600 MiB, large", r.Request, r.Rounded, r.SegmentSize, r.Class)
	}
	if r.SegmentSize != uint64(msg.TriedToAllocate) {
		t.Errorf("segment %d, message's Tried to allocate %d", r.SegmentSize, msg.TriedToAllocate)
	}
	if !within(r.Frag.Allocated, msg.Allocated) || !within(r.Frag.Unallocated(), msg.ReservedUnallocated) || !within(int64(r.DeviceFree), msg.Free) {
		t.Errorf("allocated %d, unallocated %d, device free %d; message %v, %v, %v",
			r.Frag.Allocated, r.Frag.Unallocated(), r.DeviceFree, msg.Allocated, msg.ReservedUnallocated, msg.Free)
	}
	// The cap (3.00 GiB allowed) is why cudaMalloc failed: reserved fits
	// under it, reserved plus the new segment does not.
	if !r.FractionLimited || int64(msg.Allowed) <= r.Frag.Reserved || int64(msg.Allowed) >= r.Frag.Reserved+int64(r.SegmentSize) {
		t.Errorf("fraction limited %v; allowed %v should lie in (%d, %d)", r.FractionLimited, msg.Allowed, r.Frag.Reserved, r.Frag.Reserved+int64(r.SegmentSize))
	}
	if r.Site.Frame.Name != "allocate_logits_workspace" {
		t.Errorf("OOM callsite %v, want allocate_logits_workspace", r.Site)
	}
	c, ok := r.bestCandidate()
	if !ok || c.Largest != 268435456 || !strings.Contains(c.Why, "344.00 MiB short") {
		t.Errorf("best candidate %+v, want the 256 MiB hole, 344 MiB short", c)
	}
	if r.Live[0].Site.Frame.Name != "allocate_kv_blocks" || r.Live[0].Bytes != 973078528 {
		t.Errorf("top live callsite %v %d, want allocate_kv_blocks with the live KV bytes 973078528", r.Live[0].Site, r.Live[0].Bytes)
	}
	ex := r.Explanation()
	for _, s := range []string{"600.00 MiB", "1.09 GiB", "256.00 MiB", "per-process memory fraction", "fragmentation", "expandable_segments:True", "allocate_kv_blocks"} {
		if !strings.Contains(ex, s) {
			t.Errorf("explanation lacks %q:\n%s", s, ex)
		}
	}
	fds := r.Findings()
	if len(fds) != 1 || fds[0].Callsite == nil || fds[0].Callsite.Function != "allocate_logits_workspace" || fds[0].Bytes != 629145600 {
		t.Errorf("findings %+v", fds)
	}
}

// TestOOMFormatFixtures: the 2.11 format fixtures' fraction-limited OOMs,
// without and with expandable segments (research note 5.2 and 5.4).
func TestOOMFormatFixtures(t *testing.T) {
	tests := []struct {
		path    string
		trapped int64
		advice  string
	}{
		// every hole was a whole segment and was released: 0 bytes
		// reserved but unallocated, as torch's message said.
		{"snapshot/testdata/format/fragoom.pickle", 0, "Raise the fraction"},
		// 20 MiB in partly used pages stays mapped.
		{"snapshot/testdata/format/fragoom_expandable.pickle", 20971520, "Raise the fraction"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			fx := loadFixture(t, tt.path)
			rs, err := OOMs(fx.sn, fx.tl, fx.f)
			if err != nil || len(rs) != 1 {
				t.Fatalf("%d OOM reports, %v", len(rs), err)
			}
			r := rs[0]
			if r.Rounded != 100<<20 || r.Frag.Unallocated() != tt.trapped || !r.FractionLimited || !strings.Contains(r.Explanation(), tt.advice) {
				t.Errorf("request %d, trapped %d, fraction %v, explanation %q", r.Rounded, r.Frag.Unallocated(), r.FractionLimited, r.Explanation())
			}
		})
	}
}

func TestExplainMessage(t *testing.T) {
	seed002 := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.05 GiB. GPU 0 has a total capacity of 79.10 GiB of which 5.94 GiB is free. Process 428408 has 73.15 GiB memory in use. Of the allocated memory 65.99 GiB is allocated by PyTorch, with 80.15 MiB allocated in private pools (e.g., CUDA Graphs), and 4.45 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
	fragOOM, err := os.ReadFile(filepath.Join("..", scenarios, "frag_oom/oom_message.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		text     string
		segment  string
		trapped  string
		fraction bool
		says     []string
	}{
		{"seed 002", seed002, "6.05 GiB", "4.45 GiB", false,
			[]string{"only 5.94 GiB free", "free GPU memory plus the trapped memory", "expandable_segments:True", "in chunks", "outside PyTorch's allocator"}},
		{"frag_oom", string(fragOOM), "600.00 MiB", "1.09 GiB", true,
			[]string{"capped this process at 3.00 GiB", "this OOM is fragmentation", "expandable_segments:True"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, err := memlog.ParseOOMMessages(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			r := ExplainMessage(msgs[0])
			if units.Bytes(r.SegmentSize).String() != tt.segment || units.Bytes(r.Trapped).String() != tt.trapped || r.FractionLimited != tt.fraction {
				t.Errorf("segment %d trapped %d fraction %v", r.SegmentSize, r.Trapped, r.FractionLimited)
			}
			for _, s := range tt.says {
				if !strings.Contains(r.Explanation, s) {
					t.Errorf("explanation lacks %q:\n%s", s, r.Explanation)
				}
			}
		})
	}
}
