//go:build browser

package main

import (
	"html"
	"strings"
	"testing"
)

// TestBrowserWhatIf opens the report of frag_growth, whose fragmentation
// finding (a low one: the verdict stays healthy) advises expandable
// segments: the what-if chart draws the recorded and the predicted
// reserved bytes, and its legend names the setting and both peaks.
func TestBrowserWhatIf(t *testing.T) {
	ensureChromium(t)
	dom := reportDOM(t, "../../testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz")
	checkPage(t, dom, "healthy", 1, map[string]int{"timeline": 1, "whatif": 1})
	text := html.UnescapeString(dom)
	for _, want := range []string{
		"What if: expandable_segments:True",
		"reserved, recorded", "reserved with expandable_segments:True", // the chart's series
		"recorded settings, replayed: peak 1.13 GiB", "with expandable_segments:True: peak 560.00 MiB", // the legend
		"the reserved peak would have been 560.00 MiB instead of 1.13 GiB",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
