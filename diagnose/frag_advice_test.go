package diagnose

import (
	"testing"

	"github.com/vramscope/vramscope/internal/units"
)

// TestFragAdviceTrappedWording checks the counted nouns of the trapped
// sentence: one segment has no "worst", and neither count says "1 segments".
func TestFragAdviceTrappedWording(t *testing.T) {
	const trapped = int64(512 * units.MiB)
	tests := []struct {
		segments, holes int
		want            string
	}{
		{1, 1, "trapped in 1 partly used segment (512.00 MiB free in 1 hole), pinned by "},
		{5, 8, "trapped in 5 partly used segments; the worst (512.00 MiB free in 8 holes) is pinned by "},
	}
	for _, test := range tests {
		r := &FragReport{
			Reserved: 2 * trapped, Trapped: trapped, TrappedCount: test.segments,
			Pinned: []PinnedSegment{{Free: uint64(trapped), Holes: test.holes, Pinners: []SiteGroup{{}}}},
		}
		if advice := fragAdvice(r); !hasAdvice(advice, test.want) {
			t.Errorf("%d segments, %d holes: advice %q, want it to contain %q", test.segments, test.holes, advice, test.want)
		}
	}
}

// TestFragAdviceReleasable checks what empty_cache() is said to return:
// fully free segments, whole free pages of expandable segments, or both.
func TestFragAdviceReleasable(t *testing.T) {
	const mib = int64(units.MiB)
	tests := []struct {
		segments, pages int64
		want            string
	}{
		{512 * mib, 0, "empty_cache() would return 512.00 MiB held in fully free cached memory;"},
		{0, 512 * mib, "empty_cache() would return 512.00 MiB held in whole free pages of expandable segments still in use, which it unmaps page by page;"},
		{256 * mib, 256 * mib, "empty_cache() would return 512.00 MiB held in fully free segments (256.00 MiB) and whole free pages of expandable segments still in use (256.00 MiB), which it unmaps page by page;"},
	}
	for _, test := range tests {
		r := &FragReport{Reserved: 1024 * mib, FreeSegments: test.segments, FreePages: test.pages}
		if advice := fragAdvice(r); !hasAdvice(advice, test.want) {
			t.Errorf("advice %q, want it to contain %q", advice, test.want)
		}
	}
}
