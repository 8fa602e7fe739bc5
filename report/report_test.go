package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenOptions keep the goldens small enough to review.
var goldenOptions = report.Options{Buckets: 24, MaxMarkers: 8, MaxBlocks: 400, FlameMin: 0.01}

// build loads every snapshot under paths the way vramscope report does.
func build(t *testing.T, opts report.Options, paths ...string) *report.Payload {
	t.Helper()
	ins, _, err := inputs.Expand(paths)
	if err != nil {
		t.Fatal(err)
	}
	a := analyze.New(analyze.Options{Filter: opts.Filter})
	b := report.NewBuilder(opts)
	for _, in := range ins {
		sn, tls := load(t, in)
		a.AddSnapshot(in, sn)
		if err := b.AddSnapshot(in, sn, tls); err != nil {
			t.Fatal(err)
		}
	}
	p := b.Finish(a.Report())
	if err := p.Check(); err != nil {
		t.Errorf("payload of %s is inconsistent:\n%v", paths, err)
	}
	return p
}

func load(t *testing.T, in inputs.Input) (*snapshot.Snapshot, []*replay.Timeline) {
	t.Helper()
	sn := testutil.Snapshot(t, in.Path)
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatalf("replaying %s: %v", in, err)
	}
	return sn, tls
}

func TestPayloadGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
	}{
		{"leak_closure", []string{"../testdata/scenarios/out/leak_closure"}},
		{"frag_oom", []string{"../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}},
		{"two_procs", []string{"../testdata/scenarios/out/two_procs"}},
		{"no_trace", []string{"../snapshot/testdata/format/default.pickle"}},
		{"three_gpus", []string{"../testdata/shapes/three_gpus.pickle"}},
		{"empty", []string{"../testdata/shapes/empty.pickle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.MarshalIndent(ownFields(build(t, goldenOptions, tc.paths...)), "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", tc.name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./report -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				os.WriteFile(golden+".got", got, 0o644)
				t.Errorf("payload differs from %s; wrote %s.got (go test ./report -update accepts it)", golden, golden)
			}
		})
	}
}

// ownFields reduces the findings and notes, which analyze writes and its
// own tests check, to what the payload itself decides: which findings a
// process carries, in which order. Wording changes in analyze then leave
// these goldens alone.
func ownFields(p *report.Payload) *report.Payload {
	for k := range p.Processes {
		pr := &p.Processes[k]
		fs := make([]diagnose.Finding, len(pr.Findings))
		for i, f := range pr.Findings {
			fs[i] = diagnose.Finding{Kind: f.Kind, Severity: f.Severity, Callsite: f.Callsite, Device: f.Device, Stack: []diagnose.Frame{}}
		}
		pr.Findings = fs
		pr.Notes = []string{}
	}
	return p
}

// TestFocus checks where the page opens: on the device and snapshot the
// verdict comes from.
func TestFocus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		want  *report.Focus
	}{
		// The OOM is on cuda:1, not on cuda:2, the last device.
		{"oom on the middle of three GPUs", []string{"../testdata/shapes/three_gpus.pickle"}, &report.Focus{Snapshot: 0, Device: 1, State: "oom 1"}},
		// Leaks are decided at the last snapshot.
		{"leak", []string{"../testdata/scenarios/out/leak_closure"}, &report.Focus{Snapshot: 2, Device: 0}},
		{"oom", []string{"../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}, &report.Focus{Snapshot: 0, Device: 0, State: "oom 1"}},
		// No findings: the last snapshot; no devices at all: nowhere.
		{"no trace", []string{"../testdata/shapes/no_trace.pickle"}, &report.Focus{Snapshot: 0, Device: 0}},
		{"empty", []string{"../testdata/shapes/empty.pickle"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, goldenOptions, tc.paths...)
			got := p.Processes[0].Focus
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("focus %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCheck breaks a consistent payload in each way the page would
// stumble on and expects Check to say so.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(p *report.Payload)
		want  string
	}{
		{"callsite index out of range", func(p *report.Payload) {
			st := &p.Processes[0].Snapshots[0].Devices[0].States[0]
			for i := range st.Segments[0].Blocks {
				st.Segments[0].Blocks[i].Site = len(st.Sites)
			}
		}, "names callsite"},
		{"site bytes per snapshot", func(p *report.Payload) {
			p.Processes[0].Sites[0].Bytes = p.Processes[0].Sites[0].Bytes[1:]
		}, "bytes at 2 snapshots, the process has 3"},
		{"timeline columns", func(p *report.Payload) {
			s := &p.Processes[0].Snapshots[0].Devices[0].Series
			s.ReservedMax = s.ReservedMax[1:]
		}, "timeline column reserved_max"},
		{"marker past the trace", func(p *report.Payload) {
			dv := &p.Processes[0].Snapshots[0].Devices[0]
			dv.Markers[0].Event = dv.Events
		}, "marker at event"},
		{"focus elsewhere", func(p *report.Payload) { p.Processes[0].Focus.Device = 7 }, "focus on snapshot 2 cuda:7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, goldenOptions, "../testdata/scenarios/out/leak_closure")
			tc.spoil(p)
			err := p.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
