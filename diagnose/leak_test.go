package diagnose

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/replay"
)

func TestJudge(t *testing.T) {
	tests := []struct {
		name    string
		live    []int64 // before the first step, then at each step's end
		leak    bool
		perStep int64
		grew    int
		spread  float64
		// requested is the requested bytes at the same points; nil for
		// live's.
		requested []int64
	}{
		{"steady leak", []int64{0, 10, 20, 30, 40}, true, 10, 3, 0, nil},
		{"leak on top of one-time allocations in step 1", []int64{100, 160, 170, 180}, true, 10, 2, 0, nil},
		{"one quiet step in five", []int64{0, 10, 20, 30, 30, 40, 50}, true, 10, 4, 0.2, nil},
		{"size follows the batch", []int64{0, 10, 16, 30, 38, 50}, true, 10, 4, 0.3, nil},
		{"one-time allocations only", []int64{0, 50, 50, 50, 50}, false, 0, 0, 0, nil},
		{"flat", []int64{7, 7, 7, 7}, false, 0, 0, 0, nil},
		{"too few steps", []int64{0, 10, 20}, false, 10, 1, 0, nil},
		{"two quiet steps in four", []int64{0, 10, 20, 20, 20, 30}, false, 5, 2, 1, nil},
		{"cache warming up", []int64{0, 8, 16, 20, 22, 23}, false, 3, 4, 0.75, nil},
		{"given back at the end", []int64{0, 10, 20, 30, 40, 0}, false, 10, 3, 1.25, nil},
		{"one burst", []int64{0, 10, 100, 110, 120, 130}, false, 10, 4, 2, nil},
		// NiuHuangxiaozi forward_and_backward_memory_snapshot_150: Adam's
		// state blocks take other rounded sizes each step, the tensors in
		// them do not grow.
		{"blocks grow, requested bytes do not", []int64{0, 100, 104, 108}, false, 4, 2, 0, []int64{0, 90, 90, 90}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requested := tt.requested
			if requested == nil {
				requested = tt.live
			}
			g := judge(tt.live, requested)
			if g.Leak != tt.leak || g.PerStep != tt.perStep || g.Grew != tt.grew || g.Later != len(tt.live)-2 {
				t.Errorf("got leak %v, %d per step, grew %d of %d; want %v, %d, %d of %d",
					g.Leak, g.PerStep, g.Grew, g.Later, tt.leak, tt.perStep, tt.grew, len(tt.live)-2)
			}
			if diff := g.Spread - tt.spread; diff > 0.01 || diff < -0.01 {
				t.Errorf("spread %.3f, want %.3f", g.Spread, tt.spread)
			}
			if g.FirstStep != tt.live[1]-tt.live[0] || tt.requested == nil && g.RequestedPerStep != g.PerStep {
				t.Errorf("first step %d, requested per step %d", g.FirstStep, g.RequestedPerStep)
			}
		})
	}
}

// TestLeakScript runs the whole analysis on a hand-built loop: a result
// cached every step leaks, a workspace made in step 1 does not, and the
// transient activations are never measured.
func TestLeakScript(t *testing.T) {
	s := newScriptTrace()
	s.alloc("load_weights", 1<<20)
	for n := 1; n <= 5; n++ {
		s.metadata(fmt.Sprintf("step=%d", n))
		if n == 1 {
			s.alloc("workspace", 4<<20)
		}
		s.iteration(1000)
	}
	sn := s.build()
	tl, err := replay.Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := testFilter(t)
	r := Leak(sn, tl, DetectSteps(sn, tl, f), f)
	if r.Reason != "" || len(r.Allocated) != 6 {
		t.Fatalf("reason %q, %d boundaries", r.Reason, len(r.Allocated))
	}
	live := map[string][]int64{}
	for _, site := range r.Sites {
		live[site.Site.Frame.Name] = site.Live
	}
	wantLive := map[string][]int64{
		"load_weights": {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20},
		"workspace":    {0, 4 << 20, 4 << 20, 4 << 20, 4 << 20, 4 << 20},
		// 1000 requested bytes take a 1024-byte block.
		"cache_result": {0, 1024, 2048, 3072, 4096, 5120},
	}
	if fmt.Sprint(live) != fmt.Sprint(wantLive) {
		t.Errorf("live bytes per site:\n got %v\nwant %v", live, wantLive)
	}
	fds := r.Findings()
	if len(fds) != 1 {
		t.Fatalf("%d findings, want 1: %+v", len(fds), fds)
	}
	fd := fds[0]
	if fd.Kind != KindLeak || fd.Severity != Low || fd.Callsite == nil || fd.Callsite.Function != "cache_result" ||
		fd.BytesPerStep != 1024 || fd.Bytes != 5120 || fd.Evidence["requested_bytes_per_step"] != int64(1000) {
		t.Errorf("finding %+v", fd)
	}
	if !strings.Contains(fd.Fix, "cache_result") || !strings.Contains(fd.Fix, "release the reference") {
		t.Errorf("fix %q", fd.Fix)
	}
}

func TestLeakTooFewSteps(t *testing.T) {
	s := newScriptTrace()
	for n := 1; n <= 2; n++ {
		s.metadata(fmt.Sprintf("step=%d", n))
		s.iteration(1 << 20)
	}
	sn := s.build()
	tl, err := replay.Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := testFilter(t)
	r := Leak(sn, tl, DetectSteps(sn, tl, f), f)
	if fds := r.Findings(); len(fds) != 0 || !strings.Contains(r.Reason, "at least 3") {
		t.Errorf("reason %q, findings %+v", r.Reason, fds)
	}
}
