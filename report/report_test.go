package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"path/filepath"
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
	return b.Finish(a.Report())
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
