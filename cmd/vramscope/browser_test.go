//go:build browser

// The browser test opens the report and the served UI in headless
// Chromium and checks that the charts drew, that no script failed, that
// every process drew and that the verdict is on the page: for the leak
// sample, and for what files from the wild lack (findings without a
// place, an empty snapshot, a folder of many processes, several GPUs). It installs Debian's chromium when it
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
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/report/page"
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
// the charts it drew, all of the processes drawn, and no errors.
func checkPage(t *testing.T, dom, verdict string, processes int, minCharts map[string]int) {
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
	if got, drew := attrs["data-processes"], attrs["data-processes-drawn"]; got != strconv.Itoa(processes) || drew != got {
		t.Errorf("processes on the page: %s, drawn completely: %s; want %d, all drawn", got, drew, processes)
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
		if minCharts != nil && !strings.Contains(dom, drawn) {
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
	checkPage(t, chromium(t, url, "1000", "--dump-dom"), "leak", 1, map[string]int{"timeline": 1, "state": 1, "flame": 1, "sites": 1})
	screenshot(t, url, "report.png")
}

// TestBrowserReportWild opens reports of what snapshots from the wild
// lack or hold in numbers: every process must draw, without an error.
func TestBrowserReportWild(t *testing.T) {
	ensureChromium(t)
	const shapes = "../../testdata/shapes/"
	t.Run("findings without a place", func(t *testing.T) {
		// A finding with no callsite, stack, fix or evidence (as JSON:
		// null, null, "", null), and a process whose every list is null:
		// the page must draw whatever the payload lacks.
		p := payloadOf(t, "../../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz")
		for i := range p.Processes[0].Findings {
			f := &p.Processes[0].Findings[i]
			f.Callsite, f.Stack, f.Fix, f.Evidence = nil, nil, "", nil
		}
		p.Processes = append(p.Processes, report.Process{ID: "nothing", Verdict: analyze.Healthy})
		out := filepath.Join(t.TempDir(), "report.html")
		if err := writeFile(out, func(w io.Writer) error { return page.Write(w, "vramscope report", p) }); err != nil {
			t.Fatal(err)
		}
		dom := chromium(t, "file://"+out, "1000", "--dump-dom")
		checkPage(t, dom, "oom", 2, map[string]int{"timeline": 1, "state": 1, "flame": 1})
		if !strings.Contains(dom, "could not be served") {
			t.Error("the OOM finding's title is not on the page")
		}
	})
	t.Run("empty snapshot", func(t *testing.T) {
		dom := reportDOM(t, shapes+"empty.pickle")
		checkPage(t, dom, "healthy", 1, nil)
		if !strings.Contains(dom, "no segments and no trace events") {
			t.Error("the page does not say that the snapshot is empty")
		}
	})
	t.Run("three GPUs", func(t *testing.T) {
		// The page opens on cuda:1, where the OOM is, at the OOM's state,
		// not on cuda:2, the last device.
		dom := reportDOM(t, shapes+"three_gpus.pickle")
		checkPage(t, dom, "oom", 1, map[string]int{"timeline": 1, "state": 1, "flame": 1})
		for _, want := range []string{`data-shown="0:1"`, `<button class="on">oom 1</button>`, "high oom · cuda:1", "device_free_bytes: 512.00 MiB",
			"cuda:1: allocated 4.00 GiB, reserved 6.00 GiB; trace peaks: allocated 6.00 GiB, reserved 6.00 GiB"} {
			if !strings.Contains(html.UnescapeString(dom), want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})
	t.Run("two places", func(t *testing.T) {
		// The peak of a transformers training step (H100 recording): the
		// library line that allocated and the user's line that called it.
		dom := html.UnescapeString(reportDOM(t, "../../testdata/scenarios/out/depth_loss_upcast/depth_loss_upcast.pickle.gz"))
		for _, want := range []string{"allocated in fixed_cross_entropy (", "transformers/loss/loss_utils.py:40)", "train_step (/work/main/testdata/scenarios/depth_loss_upcast.py:59)"} {
			if !strings.Contains(dom, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})
	t.Run("folder of 40 processes", func(t *testing.T) {
		// Every format fixture and shape, copied under 40 names: each
		// name is a process of its own.
		var files []string
		for _, glob := range []string{"../../snapshot/testdata/format/*.pickle", shapes + "*.pickle"} {
			m, err := filepath.Glob(glob)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
		dir := t.TempDir()
		const n = 40
		// An empty snapshot draws no state and no flame graph; one
		// without a trace draws no timeline.
		states, timelines := n, n
		for i := range n {
			src := files[i%len(files)]
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%02d_%s", i, filepath.Base(src))), data, 0o644); err != nil {
				t.Fatal(err)
			}
			switch filepath.Base(src) {
			case "empty.pickle":
				states--
				timelines--
			case "no_trace.pickle":
				timelines--
			}
		}
		checkPage(t, reportDOM(t, dir), "oom", n, map[string]int{"timeline": timelines, "state": states, "flame": states})
	})
}

// reportDOM runs vramscope report on args and returns the page's DOM
// once drawn.
func reportDOM(t *testing.T, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.html")
	var stderr strings.Builder
	if code := run(context.Background(), io.Discard, &stderr, append([]string{"report", "-o", out}, args...)); code != exitOK {
		t.Fatalf("vramscope report exited %d: %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "inconsistent") {
		t.Errorf("vramscope report: %s", stderr.String())
	}
	return chromium(t, "file://"+out, "1000", "--dump-dom")
}

// payloadOf builds the report payload of paths as vramscope report does.
func payloadOf(t *testing.T, paths ...string) *report.Payload {
	t.Helper()
	vl, err := loadViews(context.Background(), io.Discard, paths, viewFlags{buckets: 1200}, nil)
	if err != nil || vl.failed > 0 {
		t.Fatalf("loading %s: %v (%d failed)", paths, err, vl.failed)
	}
	return vl.payload
}

func TestBrowserServe(t *testing.T) {
	ensureChromium(t)
	base := startServe(t, sample)
	// The last snapshot of the sample (id 2) at event 150, and the diff
	// of the first and the last: what a click and two picks would show.
	url := base + "?at=2:0:150&diff=0,2"
	dom := chromium(t, url, "1000", "--dump-dom")
	checkPage(t, dom, "leak", 1, map[string]int{"timeline": 1, "state": 1, "flame": 1})
	for _, want := range []string{"event 150: ", "<th>change</th>", "Diff at the peak", "compute_next_token_logits (leak_closure.py)"} {
		if !strings.Contains(dom, want) {
			t.Errorf("served UI lacks %q: the on-demand state or diff did not load", want)
		}
	}
	screenshot(t, url, "serve.png")
}

// startServe runs vramscope serve on args on a free loopback port until
// the test ends, and returns its address once the inputs are loaded.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- run(ctx, io.Discard, pw, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
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
	return base
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

// TestBrowserBreakdown opens the report of the H100 Llama training run
// (transformers, stacks="all"): the page stacks its memory by category,
// with the parameters, Adam state, gradients, activations and cuBLAS
// workspaces it holds, and by module.
func TestBrowserBreakdown(t *testing.T) {
	ensureChromium(t)
	const llama = "../../testdata/breakdown/out/llama_train.pickle.gz"
	dom := reportDOM(t, llama)
	checkPage(t, dom, "healthy", 1, map[string]int{"timeline": 1, "composition": 1})
	m := regexp.MustCompile(`class="composition" data-bands="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("no composition chart on the page")
	}
	for _, c := range []string{"parameter", "gradient", "optimizer_state", "activation", "temporary", "workspace"} {
		if !slices.Contains(strings.Split(m[1], ","), c) {
			t.Errorf("the category chart lacks %s: bands %s", c, m[1])
		}
	}
	if !strings.Contains(dom, ">by module</button>") {
		t.Error("no by-module tab")
	}
	out := filepath.Join(t.TempDir(), "report.html")
	if code := run(context.Background(), io.Discard, io.Discard, []string{"report", "-o", out, llama}); code != exitOK {
		t.Fatalf("vramscope report exited %d", code)
	}
	screenshot(t, "file://"+out, "breakdown.png")
}
