package diagnose

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func hasAdvice(advice []string, s string) bool {
	return slices.ContainsFunc(advice, func(a string) bool { return strings.Contains(a, s) })
}

func TestFragAtEnd(t *testing.T) {
	tests := []struct {
		path          string
		trapped       int64 // torch's inactive_split_bytes, or the scenario's layout
		pinner        string
		largestHole   uint64
		wantAdvice    []string
		notAdvice     []string
		findingSite   string
		findingAdvice string
	}{
		// 8 holes carved from the freed 2 GiB staging buffer, held by live
		// KV blocks (expected.json: expected_reserved_unallocated_bytes,
		// largest_hole_bytes).
		{scenarios + "frag_oom/frag_oom.pickle.gz", 1174405120, "allocate_kv_blocks", 268435456,
			[]string{"expandable_segments:True", "max_split_size_mb:256"}, []string{"empty_cache() would return"},
			"allocate_kv_blocks", "expandable_segments:True"},
		// Every step's outputs are freed by the end: nothing trapped, the
		// grown cache is in fully free segments, which empty_cache returns.
		{scenarios + "frag_growth/step4/rollout_rank0_pid656.pickle.gz", 0, "", 0,
			[]string{"empty_cache() would return 900.00 MiB"}, []string{"expandable_segments"},
			"run_rollout_request", "expandable_segments:True avoids that growth"},
		// After the peak: the 2.8 GiB cache is reusable; 263 MiB trapped
		// behind the weights and the cuBLAS workspace is not worth advice.
		{scenarios + "peak_upcast/peak_upcast.pickle.gz", 275767296, "model_forward", 262340608,
			[]string{"empty_cache() would return"}, []string{"expandable_segments"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			fx := loadFixture(t, tt.path)
			side := sidecar(t, tt.path)
			r, err := Frag(fx.sn, fx.tl, fx.f, fx.tl.Len()-1, "end")
			if err != nil {
				t.Fatal(err)
			}
			if r.Reserved != num(t, side, "reserved_bytes.all.current") || r.Allocated != num(t, side, "allocated_bytes.all.current") {
				t.Errorf("reserved %d allocated %d, torch %d %d", r.Reserved, r.Allocated,
					num(t, side, "reserved_bytes.all.current"), num(t, side, "allocated_bytes.all.current"))
			}
			if r.Trapped != tt.trapped {
				t.Errorf("trapped %d, want %d", r.Trapped, tt.trapped)
			}
			if stats, _ := side["memory_stats"].(map[string]any); stats != nil {
				if v, ok := stats["inactive_split_bytes.all.current"].(float64); ok && int64(v) != r.Trapped {
					t.Errorf("trapped %d, torch's inactive_split_bytes %d", r.Trapped, int64(v))
				}
			}
			if got := r.FreeSegments + r.Trapped + r.PendingFree + r.PrivatePools; got != r.Unallocated() {
				t.Errorf("free segments + trapped + pending + private = %d, reserved - allocated = %d", got, r.Unallocated())
			}
			if tt.pinner != "" {
				p := r.Pinned[0]
				if p.Pinners[0].Site.Frame.Name != tt.pinner || p.LargestHole != tt.largestHole {
					t.Errorf("worst segment pinned by %v with largest hole %d, want %s, %d", p.Pinners[0].Site, p.LargestHole, tt.pinner, tt.largestHole)
				}
			}
			for _, a := range tt.wantAdvice {
				if !hasAdvice(r.Advice, a) {
					t.Errorf("advice %q lacks %q", r.Advice, a)
				}
			}
			for _, a := range tt.notAdvice {
				if hasAdvice(r.Advice, a) {
					t.Errorf("advice %q should not say %q", r.Advice, a)
				}
			}
			dr, err := Explain(fx.sn, fx.tl, fx.f)
			if err != nil {
				t.Fatal(err)
			}
			var frag *Finding
			for i := range dr.Findings {
				if dr.Findings[i].Kind == KindFragmentation {
					frag = &dr.Findings[i]
				}
			}
			switch {
			case tt.findingSite == "" && frag != nil:
				t.Errorf("unexpected fragmentation finding %+v", frag)
			case tt.findingSite == "":
			case frag == nil:
				t.Errorf("no fragmentation finding")
			case frag.Callsite == nil || frag.Callsite.Function != tt.findingSite || !strings.Contains(frag.Fix, tt.findingAdvice):
				t.Errorf("fragmentation finding blames %+v, fix %q; want %s and %q", frag.Callsite, frag.Fix, tt.findingSite, tt.findingAdvice)
			}
		})
	}
}

// TestFragExpandable: with expandable segments only whole free 20 MiB pages
// can be unmapped, so two 10 MiB holes in mapped pages stay trapped.
func TestFragExpandable(t *testing.T) {
	fx := loadFixture(t, "snapshot/testdata/format/fragoom_expandable.pickle")
	r, err := Frag(fx.sn, fx.tl, fx.f, fx.tl.Len()-1, "end")
	if err != nil {
		t.Fatal(err)
	}
	if r.Trapped != 20971520 || r.FreeSegments != 0 || r.Largest[0].Largest != 10485760 || r.Largest[0].Blocks != 2 {
		t.Errorf("trapped %d, free segments %d, largest %+v; want 20 MiB trapped in two 10 MiB holes", r.Trapped, r.FreeSegments, r.Largest)
	}
}
