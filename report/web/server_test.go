package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/report/web"
	"github.com/vramscope/vramscope/snapshot"
)

// newServer loads the leak_closure scenario's three snapshots.
func newServer(t *testing.T) (*web.Server, *report.Payload) {
	t.Helper()
	ins, _, err := inputs.Expand([]string{"../../testdata/scenarios/out/leak_closure"})
	if err != nil {
		t.Fatal(err)
	}
	srv := web.New("test", len(ins))
	a := analyze.New(analyze.Options{})
	b := report.NewBuilder(report.Options{})
	loaded := map[string]web.Loaded{}
	for k, in := range ins {
		r, err := in.Open()
		if err != nil {
			t.Fatal(err)
		}
		sn, err := snapshot.Read(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		tls, err := replay.Devices(sn)
		if err != nil {
			t.Fatal(err)
		}
		a.AddSnapshot(in, sn)
		if err := b.AddSnapshot(in, sn, tls); err != nil {
			t.Fatal(err)
		}
		loaded[in.Path] = web.Loaded{Snapshot: sn, Timelines: tls}
		srv.Progress(k+1, in.String())
	}
	p := b.Finish(a.Report())
	srv.Ready(p, b, loaded)
	return srv, p
}

func get(t *testing.T, h http.Handler, url string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHandlers(t *testing.T) {
	srv, p := newServer(t)
	h := srv.Handler()
	last := p.Processes[0].Snapshots[2]
	for _, tc := range []struct {
		url  string
		code int
		want string // a substring of the body
	}{
		{"/", 200, "VRAMSCOPE_PAYLOAD = null"},
		{"/api/status", 200, `"state":"ready"`},
		{"/api/report", 200, `"verdict":"leak"`},
		{"/api/state?snapshot=2&device=0&event=10", 200, `"label":"event 10"`},
		{"/api/state?snapshot=2&device=0&event=-1", 200, `"segments"`},
		{"/api/flame?snapshot=2&device=0&event=50", 200, `"name":"all"`},
		{"/api/diff?base=0&other=2", 200, `"rows"`},
		// Bad input is a 400 with a reason, never a panic.
		{"/api/state?snapshot=2&device=0&event=99999999", 400, "outside the trace"},
		{"/api/state?snapshot=2&device=0&event=-2", 400, "outside the trace"},
		{"/api/state?snapshot=2&device=7&event=0", 400, "no device 7"},
		{"/api/state?snapshot=9&device=0&event=0", 400, "no such snapshot"},
		{"/api/state?snapshot=x", 400, "want integer"},
		{"/api/flame", 400, "want integer"},
		{"/api/diff?base=0", 400, "no such snapshot"},
		{"/api/diff?base=0&other=2&at=middle", 400, "want peak, end or step N"},
		{"/api/diff?base=0&other=2&at=step%209", 400, "no step 9"},
		{"/api/nothing", 404, ""},
	} {
		code, body := get(t, h, tc.url)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.url, code, body, tc.code, tc.want)
		}
	}
	if last.ID != 2 || last.Devices[0].Events == 0 {
		t.Fatalf("fixture changed: last snapshot %d with %d events", last.ID, last.Devices[0].Events)
	}
}

// The served diff is vramscope diff's: step 2 against step 4 of
// leak_closure at their ends holds the two leaking callsites' growth, by
// line on request.
func TestDiff(t *testing.T) {
	srv, _ := newServer(t)
	for _, tc := range []struct {
		query, at string
		lines     bool
	}{
		{"base=0&other=2&at=end", "end", false},
		{"base=0&other=2&at=end&lines=1", "end", true},
		{"base=0&other=2", "peak", false},
	} {
		code, body := get(t, srv.Handler(), "/api/diff?"+tc.query)
		var rep diff.Report
		if err := json.Unmarshal([]byte(body), &rep); code != 200 || err != nil {
			t.Fatalf("%s: %d %v %.200q", tc.query, code, err, body)
		}
		if rep.Version != diff.Version || rep.At != tc.at || rep.Lines != tc.lines || len(rep.Pairs) != 1 || len(rep.Pairs[0].Devices) != 1 {
			t.Fatalf("%s: %+v", tc.query, rep)
		}
		d := rep.Pairs[0].Devices[0]
		if !strings.Contains(rep.Pairs[0].B.Path, "step4") || d.Callsites == nil || d.Categories == nil || d.Modules == nil {
			t.Fatalf("%s: B %s, tables %v %v %v", tc.query, rep.Pairs[0].B.Path, d.Callsites != nil, d.Categories != nil, d.Modules != nil)
		}
		if tc.at != "end" {
			continue
		}
		top := d.Callsites.Rows[0]
		if !strings.HasPrefix(top.Name, "compute_next_token_logits (leak_closure.py") || top.Change != diff.Grown || top.BBlocks != 4 || top.ABlocks != 2 {
			t.Errorf("%s: top row %s %s, blocks %d -> %d", tc.query, top.Change, top.Name, top.ABlocks, top.BBlocks)
		}
		if tc.lines != strings.HasPrefix(top.Name, "compute_next_token_logits (leak_closure.py:") {
			t.Errorf("%s: row %q", tc.query, top.Name)
		}
	}
}

// The state the API serves at an event is the one the static report
// embeds for that moment: one builder, one set of numbers.
func TestStateMatchesPayload(t *testing.T) {
	srv, p := newServer(t)
	dv := p.Processes[0].Snapshots[2].Devices[0]
	peak := dv.States[0]
	_, body := get(t, srv.Handler(), "/api/state?snapshot=2&device=0&event="+strconv.Itoa(peak.Event))
	var got report.State
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.AllocatedBytes != peak.AllocatedBytes || got.ReservedBytes != peak.ReservedBytes || len(got.Segments) != len(peak.Segments) {
		t.Errorf("state at the peak event: served %d/%d bytes in %d segments, payload %d/%d in %d",
			got.AllocatedBytes, got.ReservedBytes, len(got.Segments), peak.AllocatedBytes, peak.ReservedBytes, len(peak.Segments))
	}
}

func TestLoading(t *testing.T) {
	srv := web.New("test", 3)
	srv.Progress(1, "a.pickle")
	h := srv.Handler()
	for _, tc := range []struct {
		url  string
		code int
		want string
	}{
		{"/api/status", 200, `"done":1,"total":3,"current":"a.pickle"`},
		{"/api/report", 503, "still loading"},
		{"/api/state?snapshot=0&device=0&event=0", 503, "still loading"},
		{"/api/diff?base=0&other=0", 503, "still loading"},
	} {
		code, body := get(t, h, tc.url)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %.200q, want %d containing %q", tc.url, code, body, tc.code, tc.want)
		}
	}
}
