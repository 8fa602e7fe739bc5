//go:build browser

// The browser test opens the report and the served UI in headless
// Chromium and checks that the charts drew, that no script failed and
// that the verdict is on the page. It installs Debian's chromium when it
// is missing, so it runs behind the "browser" build tag, from
// .ci/browser:
//
//	go test -tags browser -run Browser ./cmd/vramscope
//	go test -tags browser -run Browser ./cmd/vramscope -docs   # also rewrites docs/*.png
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var docs = flag.Bool("docs", false, "write the screenshots to docs/report.png and docs/serve.png")

const chromiumPath = "/usr/bin/chromium"

// ensureChromium installs Debian's chromium if it is missing, and fails
// with the reason when it cannot: a browser test that skips itself
// silently proves nothing.
func ensureChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	t.Logf("%s missing: installing Debian's chromium", chromiumPath)
	install := exec.Command("sh", "-c", "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("the browser test needs %s and installing it failed (%v); install the Debian package chromium "+
			"(apt-get install chromium, as root) and rerun:\n%s", chromiumPath, err, tail(out, 2000))
	}
}

// chromium runs headless Chromium on url with extra flags (--dump-dom or
// --screenshot=...) and returns its standard output.
func chromium(t *testing.T, url, height string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{
		// The flags that work in a sandbox without network (see
		// .library/env/machines/go.md): no background connections, a
		// throwaway profile.
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400," + height, "--virtual-time-budget=5000",
	}, extra...)
	cmd := exec.CommandContext(ctx, chromiumPath, append(args, url)...)
	cmd.Dir = t.TempDir() // --screenshot with a relative path lands here
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, tail([]byte(stderr.String()), 2000))
	}
	return string(out)
}

var bodyTag = regexp.MustCompile(`<body([^>]*)>`)
var attr = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)

// checkPage asserts what the page's script recorded on <body>: drawn,
// the charts it drew, and no errors.
func checkPage(t *testing.T, dom, verdict string, minCharts map[string]int) {
	t.Helper()
	m := bodyTag.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no <body> in the DOM:\n%s", tail([]byte(dom), 2000))
	}
	attrs := map[string]string{}
	for _, a := range attr.FindAllStringSubmatch(m[1], -1) {
		attrs[a[1]] = html.UnescapeString(a[2])
	}
	if attrs["data-drawn"] != "1" {
		t.Errorf("page did not finish drawing (data-drawn=%q)", attrs["data-drawn"])
	}
	if e := attrs["data-errors"]; e != "" {
		t.Errorf("console errors:\n%s", e)
	}
	var charts map[string]int
	if err := json.Unmarshal([]byte(attrs["data-charts"]), &charts); err != nil {
		t.Errorf("data-charts %q: %v", attrs["data-charts"], err)
	}
	for name, n := range minCharts {
		if charts[name] < n {
			t.Errorf("%s charts drawn: %d, want at least %d", name, charts[name], n)
		}
	}
	if !strings.Contains(dom, "Verdict: "+verdict) {
		t.Errorf("verdict text %q not on the page", "Verdict: "+verdict)
	}
	for _, drawn := range []string{"<canvas", "<svg", "<rect"} {
		if !strings.Contains(dom, drawn) {
			t.Errorf("no %s element: a chart is missing", drawn)
		}
	}
}

// screenshot saves a screenshot of url as name in the test's artifact
// directory (go test -artifacts) and, with -docs, in docs/.
func screenshot(t *testing.T, url, name string) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	chromium(t, url, "1800", "--screenshot="+path)
	info, err := os.Stat(path)
	if err != nil || info.Size() < 20<<10 {
		t.Fatalf("screenshot %s missing or blank (%v)", path, err)
	}
	if *docs {
		data, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(filepath.Join("..", "..", "docs", name), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

const sample = "../../testdata/scenarios/out/leak_closure"

func TestBrowserReport(t *testing.T) {
	ensureChromium(t)
	out := filepath.Join(t.TempDir(), "report.html")
	var stderr strings.Builder
	if code := run(context.Background(), io.Discard, &stderr, []string{"report", sample, "-o", out}); code != exitOK {
		t.Fatalf("vramscope report exited %d: %s", code, stderr.String())
	}
	url := "file://" + out
	checkPage(t, chromium(t, url, "1000", "--dump-dom"), "leak", map[string]int{"timeline": 1, "state": 1, "flame": 1, "sites": 1})
	screenshot(t, url, "report.png")
}

func TestBrowserServe(t *testing.T) {
	ensureChromium(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- run(ctx, io.Discard, pw, []string{"serve", "--addr", "127.0.0.1:0", sample})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The first line names the address; the rest is drained.
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("vramscope serve printed nothing")
	}
	m := regexp.MustCompile(`serving (http://\S+/)`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("vramscope serve: %s", lines.Text())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	base := m[1]
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("serve bound to %s, want loopback", base)
	}
	waitReady(t, base)
	// The last snapshot of the sample (id 2) at event 150, and the diff
	// of the first and the last: what a click and two picks would show.
	url := base + "?at=2:0:150&diff=0,2"
	dom := chromium(t, url, "1000", "--dump-dom")
	checkPage(t, dom, "leak", map[string]int{"timeline": 1, "state": 1, "flame": 1})
	for _, want := range []string{"event 150: ", "<th>change</th>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("served UI lacks %q: the on-demand state or diff did not load", want)
		}
	}
	screenshot(t, url, "serve.png")
}

// waitReady polls /api/status until the inputs are loaded.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "api/status")
		if err == nil {
			var st struct{ State, Error string }
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			switch {
			case err == nil && st.State == "ready":
				return
			case err == nil && st.State == "failed":
				t.Fatalf("serve failed to load: %s", st.Error)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("serve did not finish loading in 60 s")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
