package page_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/report/page"
)

func TestWrite(t *testing.T) {
	// A callsite label that tries to close the script element.
	p := &report.Payload{Version: report.PayloadVersion, Verdict: "leak", Processes: []report.Process{{ID: "</script><script>alert(1)</script>"}}}
	var buf bytes.Buffer
	if err := page.Write(&buf, "t", p); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`"verdict":"leak"`, "uPlot", "flamegraph", "drawAllocState", `data-drawn="0"`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(html, "<script>alert(1)") {
		t.Error("payload text closed the script element")
	}
	for _, ref := range []string{"src=\"http", "href=\"http", "cdn."} {
		if strings.Contains(html, ref) {
			t.Errorf("page refers to the network: %q", ref)
		}
	}
}
