package diagnose

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/summary"
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
			if got := r.FreeSegments + r.FreePages + r.Trapped + r.PendingFree + r.PrivatePools; got != r.Unallocated() {
				t.Errorf("free segments + pages + trapped + pending + private = %d, reserved - allocated = %d", got, r.Unallocated())
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

// TestFragExpandablePages: at the reserved peak of expandable.pickle one
// whole free 20 MiB page lies in a segment that still holds live blocks;
// empty_cache() unmaps it, so it is no trapped memory and no fully free
// segment, and a segment is listed as pinned only for its slivers and with
// the blocks that pin them.
func TestFragExpandablePages(t *testing.T) {
	fx := loadFixture(t, "snapshot/testdata/format/expandable.pickle")
	p := Peak(fx.sn, fx.tl, fx.f)
	r, err := Frag(fx.sn, fx.tl, fx.f, p.Reserved.Index, "reserved peak")
	if err != nil {
		t.Fatal(err)
	}
	const MiB = 1 << 20
	if r.FreePages != 20*MiB || r.FreePagesCount != 1 || r.FreeSegments != 0 || r.FreeSegmentsCount != 0 || r.Releasable() != 20*MiB {
		t.Errorf("pages %d in %d segments, fully free %d in %d; want one whole 20 MiB page and no free segment",
			r.FreePages, r.FreePagesCount, r.FreeSegments, r.FreeSegmentsCount)
	}
	for _, s := range r.Pinned {
		if len(s.Pinners) == 0 || s.Free <= s.Pages {
			t.Errorf("segment %#x listed as pinned with %d pinners, %d free of which %d in pages", s.Address, len(s.Pinners), s.Free, s.Pages)
		}
	}
}

// TestFragAgreesWithStats checks, on every fixture, that the end state's
// split of free memory adds up to what stats (package summary) reports:
// its free segments are the fully free ones, its free memory in used
// segments is the whole free pages plus what is trapped, and private
// pools hold the rest.
func TestFragAgreesWithStats(t *testing.T) {
	for _, file := range fixtureFiles(t) {
		sn, tls := replayFile(t, file)
		sum := summary.Of(sn)
		for _, tl := range tls {
			if tl.Len() == 0 {
				continue
			}
			r, err := Frag(sn, tl, testFilter(t), tl.Len()-1, "end")
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var freeSegs, freeInUsed, private uint64
			for _, d := range sum.Devices {
				if d.Device != tl.Device {
					continue
				}
				for _, p := range d.Pools {
					if p.ID.IsDefault() {
						freeSegs += p.FreeSegmentBytes
						freeInUsed += p.FreeInUsedSegmentsBytes
					} else {
						private += p.FreeBytes()
					}
				}
			}
			if int64(freeSegs) != r.FreeSegments || int64(freeInUsed) != r.FreePages+r.Trapped || int64(private) != r.PrivatePools {
				t.Errorf("%s device %d: stats free segments %d, free in used %d, private %d; frag %d, %d pages + %d trapped, %d",
					file, tl.Device, freeSegs, freeInUsed, private, r.FreeSegments, r.FreePages, r.Trapped, r.PrivatePools)
			}
		}
	}
}
