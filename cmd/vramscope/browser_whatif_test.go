//go:build browser

package main

import (
	"html"
	"strings"
	"testing"
)

// TestBrowserWhatIf opens the report and the served UI of frag_growth,
// whose fragmentation finding (a low one: the verdict stays healthy)
// advises expandable segments: the what-if chart draws the recorded and
// the predicted reserved bytes, and its legend names the setting and both
// peaks.
func TestBrowserWhatIf(t *testing.T) {
	ensureChromium(t)
	const growth = "../../testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz"
	for _, tc := range []struct {
		name string
		dom  func() string
	}{
		{"report", func() string { return reportDOM(t, growth) }},
		{"serve", func() string { return chromium(t, startServe(t, growth), "1000", "--dump-dom") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dom := tc.dom()
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
		})
	}
}
