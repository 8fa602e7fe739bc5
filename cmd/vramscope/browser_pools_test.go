//go:build browser

package main

import (
	"context"
	"encoding/json"
	"github.com/vramscope/vramscope/internal/testutil"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrowserReportPools opens the report of a serving log with two
// leaking ranks (testdata/pools/sglang05_dp_busy_leak): each rank's pool
// chart draws, with its onset line, and the onset is named above it.
func TestBrowserReportPools(t *testing.T) {
	ensureChromium(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "server.log")
	data := testutil.Gunzip(t, "../../testdata/pools/sglang05_dp_busy_leak.log.gz")
	if err := os.WriteFile(log, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.html")
	var stderr strings.Builder
	if code := run(context.Background(), io.Discard, &stderr, []string{"report", log, "-o", out}); code != exitOK {
		t.Fatalf("vramscope report exited %d: %s", code, stderr.String())
	}
	dom := chromium(t, "file://"+out, "1400", "--dump-dom")
	checkPage(t, dom, "leak", 1, nil)
	m := bodyTag.FindStringSubmatch(dom)
	var charts map[string]int
	for _, a := range attr.FindAllStringSubmatch(m[1], -1) {
		if a[1] == "data-charts" {
			if err := json.Unmarshal([]byte(html.UnescapeString(a[2])), &charts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if charts["pools"] != 2 || charts["pool_onsets"] != 2 {
		t.Errorf("pool charts drawn %d, with an onset %d; want 2 and 2", charts["pools"], charts["pool_onsets"])
	}
	for _, want := range []string{`data-rank="DP3 TP0" data-onset-drawn="1"`, `data-rank="DP4 TP0" data-onset-drawn="1"`, `<span class="pool-onset">leak onset 2026-03-02 `, "<canvas"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	screenshot(t, "file://"+out, "report_pools.png")
}
