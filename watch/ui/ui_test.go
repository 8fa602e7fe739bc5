package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/localhttp"
	"github.com/vramscope/vramscope/watch/agent"
	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/gpu/gputest"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/proc/proctest"
	"github.com/vramscope/vramscope/watch/verdict"
)

type canned struct{}

func (canned) Capture(ctx context.Context, id proc.Identity) (*dump.Result, error) {
	return &dump.Result{PID: id.PID, Verdict: "leak", Inputs: []string{"/runs/mem/step2/x.pickle"}, Findings: []diagnose.Finding{{
		Kind: diagnose.KindLeak, Severity: diagnose.High, Title: "keep_logits keeps 16.00 MiB more live memory every step",
		Callsite: &diagnose.Frame{Function: "keep_logits", File: "leak.py", Line: 30},
	}}}, nil
}

// server runs an agent over a scripted leaking process for 12 minutes of
// samples and serves the page.
func server(t *testing.T) (*httptest.Server, *[]string) {
	node := gputest.NewNode(1)
	tree := proctest.New(t)
	tree.Start(proctest.Process{PID: 77, StartTicks: 1, Command: "python3", Argv: []string{"python3", "leak.py"}, Env: map[string]string{dump.EnvOut: "/runs/mem"}})
	src, err := gpu.Open(node.Lib())
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Verdict: verdict.DefaultConfig, Capture: true, CaptureEvery: time.Hour, CompactEvery: time.Hour},
		src, &proc.Reader{Root: tree.Root, Keep: dump.EnvVars}, nil, canned{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	for s := range 12 * 60 {
		node.Set(0, 77, uint64(4096+s)*gputest.MiB)
		a.Step(t0.Add(time.Duration(s) * time.Second))
		a.Wait()
	}
	var reported []string
	h := Handler(a, Options{Hostname: "node-7", Report: func(ctx context.Context, w io.Writer, title string, paths []string) error {
		reported = append(reported, paths...)
		_, err := io.WriteString(w, "<html>"+title+"</html>")
		return err
	}})
	// Served as watch serves it, behind the guard.
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = localhttp.Guard(srv.Listener.Addr(), h, localhttp.Options{Static: Static})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &reported
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

func TestState(t *testing.T) {
	srv, _ := server(t)
	body, code := get(t, srv.URL+"/api/state")
	var st struct {
		Hostname  string `json:"hostname"`
		Reports   bool   `json:"reports"`
		Processes []struct {
			Key     string `json:"key"`
			PID     int    `json:"pid"`
			Hooked  bool   `json:"hooked"`
			Verdict struct {
				Verdict string `json:"verdict"`
			} `json:"verdict"`
			Capture *struct {
				Findings []struct {
					Callsite struct{ File string } `json:"callsite"`
				} `json:"findings"`
			} `json:"capture"`
		} `json:"processes"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("%d %v: %s", code, err, body)
	}
	if st.Hostname != "node-7" || !st.Reports || len(st.Processes) != 1 {
		t.Fatalf("state %+v", st)
	}
	p := st.Processes[0]
	if p.PID != 77 || !p.Hooked || p.Verdict.Verdict != "leak" || p.Capture == nil || p.Capture.Findings[0].Callsite.File != "leak.py" {
		t.Errorf("process %+v", p)
	}
	// The environment never reaches the page.
	if strings.Contains(body, "VRAMSCOPE_OUT") || strings.Contains(body, `"env"`) {
		t.Errorf("the page gets the environment: %s", body)
	}

	series, code := get(t, srv.URL+"/api/series?key="+p.Key)
	var s struct {
		T []int64 `json:"t"`
		V []int64 `json:"v"`
	}
	if err := json.Unmarshal([]byte(series), &s); err != nil || code != 200 || len(s.T) != 601 || s.V[600] != (4096+719)*gputest.MiB {
		t.Errorf("series: %d points, %v, %d", len(s.T), err, code)
	}
	if _, code := get(t, srv.URL+"/api/series?key=nope"); code != http.StatusNotFound {
		t.Errorf("unknown series: %d", code)
	}
}

func TestReportLink(t *testing.T) {
	srv, reported := server(t)
	var st struct {
		Processes []struct{ Key string } `json:"processes"`
	}
	body, _ := get(t, srv.URL+"/api/state")
	json.Unmarshal([]byte(body), &st)
	page, code := get(t, srv.URL+"/report?key="+st.Processes[0].Key)
	if code != 200 || !strings.Contains(page, "pid 77 (python3) on gpu 0") || len(*reported) != 1 || (*reported)[0] != "/runs/mem/step2/x.pickle" {
		t.Errorf("report %d %q, inputs %v", code, page, *reported)
	}
}

// The page loads nothing from elsewhere: no script, style or image by URL.
func TestPageIsSelfContained(t *testing.T) {
	srv, _ := server(t)
	page, code := get(t, srv.URL+"/")
	if code != 200 || !strings.Contains(page, "vramscope watch") {
		t.Fatalf("page %d", code)
	}
	if m := regexp.MustCompile(`(?i)<(script|link|img|iframe)[^>]+(src|href)=|@import|url\(`).FindString(page); m != "" {
		t.Errorf("the page loads %q", m)
	}
	for _, u := range regexp.MustCompile(`https?://[^"' )]+`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" { // the SVG namespace, not a fetch
			t.Errorf("the page names %s", u)
		}
	}
}

func TestDumpFromAnotherSiteRefused(t *testing.T) {
	srv, _ := server(t)
	req, _ := http.NewRequest("POST", srv.URL+"/api/dump?pid=77", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin dump: %d, want 403", resp.StatusCode)
	}
	req, _ = http.NewRequest("POST", srv.URL+"/api/dump?pid=77", nil)
	req.Header.Set("Origin", srv.URL)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "keep_logits") {
		t.Errorf("same-origin dump: %d %s", resp.StatusCode, body)
	}
}
