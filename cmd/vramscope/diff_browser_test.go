//go:build browser

package main

import (
	"context"
	"html"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrowserDiff opens the pages of vramscope diff --html in headless
// Chromium: the peak of peak_upcast against its fix (the upcast's rows)
// and frag_growth against its expandable-segments run (the settings), and
// checks that each drew without console errors.
//
//	go test -tags browser -run BrowserDiff ./cmd/vramscope [-docs]
func TestBrowserDiff(t *testing.T) {
	ensureChromium(t)
	const out = "../../testdata/scenarios/out/"
	for _, c := range []struct {
		name     string
		args     []string
		rows     string
		want     []string
		shotName string
	}{
		// Callsite, category and module rows.
		{"peak", []string{out + "peak_chunked", out + "peak_upcast"}, "4",
			[]string{"Diff at the peak", "compute_logprobs (peak_upcast.py)", `data-dimension="callsite"`, "+2.24 GiB",
				`data-dimension="category"`, ">temporary</td>", `data-dimension="module"`}, "diff.png"},
		{"by line", []string{"--lines", "--top", "3", "--by", "callsite", out + "peak_chunked", out + "peak_upcast"}, "3",
			[]string{"compute_logprobs (peak_upcast.py:40)", "more</td>"}, ""},
		{"settings", []string{out + "frag_growth", out + "frag_growth_expandable"}, "3",
			[]string{"<td>expandable_segments</td><td>False</td><td>True</td>", "-596.00 MiB"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), "diff.html")
			var stderr strings.Builder
			args := append([]string{"diff", "--html", page}, c.args...)
			if code := run(context.Background(), io.Discard, &stderr, args); code != exitOK {
				t.Fatalf("vramscope diff exited %d: %s", code, stderr.String())
			}
			url := "file://" + page
			dom := chromium(t, url, "1000", "--dump-dom")
			m := bodyTag.FindStringSubmatch(dom)
			if m == nil {
				t.Fatalf("no <body> in the DOM:\n%s", tail([]byte(dom), 2000))
			}
			attrs := map[string]string{}
			for _, a := range attr.FindAllStringSubmatch(m[1], -1) {
				attrs[a[1]] = html.UnescapeString(a[2])
			}
			if attrs["data-drawn"] != "1" || attrs["data-errors"] != "" {
				t.Errorf("drawn %q, console errors:\n%s", attrs["data-drawn"], attrs["data-errors"])
			}
			if attrs["data-pairs"] != "1" || attrs["data-rows"] != c.rows {
				t.Errorf("pairs %q, rows %q; want 1 and %s", attrs["data-pairs"], attrs["data-rows"], c.rows)
			}
			for _, w := range c.want {
				if !strings.Contains(dom, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if c.shotName != "" {
				screenshot(t, url, c.shotName)
			}
		})
	}
}
