package breakdown

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/replay/replaytest"
)

func report(t *testing.T, path string) (*Breakdown, Report, []diagnose.Finding) {
	t.Helper()
	sn := testutil.Snapshot(t, filepath.Join("..", path))
	tl, err := replay.Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := callsite.NewFilter("", "")
	ev := ReadEvents(sn, tl.Device, tl.Trace, Options{Filter: f})
	b := ev.Classify(tl)
	steps := diagnose.DetectSteps(sn, tl, f)
	r := ev.Report(tl, steps)
	fs := diagnose.Leak(sn, tl, steps, f).Findings()
	if ex, err := diagnose.Explain(sn, tl, f); err == nil {
		fs = append(fs, ex.Findings...)
	}
	r.Annotate(fs)
	return b, r, fs
}

// TestReportLeak: train_deep_leak keeps each step's logits (523264000
// bytes, 524288000 in blocks) alive; they are forward outputs, so the
// activations grow by that much a step, and the leak finding says so.
func TestReportLeak(t *testing.T) {
	_, r, fs := report(t, "testdata/scenarios/out/train_deep_leak/train_deep_leak.pickle.gz")
	if len(r.Steps) != 5 {
		t.Errorf("%d step summaries, want the 5 iterations", len(r.Steps))
	}
	if c, g := r.Growing(); c != Activation || g != 524288000 {
		t.Errorf("growing %s by %d per step, want activation by 524288000", c, g)
	}
	found := false
	for _, f := range fs {
		if f.Kind == diagnose.KindLeak {
			found = true
			// The leaked logits: 5 steps' worth, 2.44 GiB at the end.
			if got := f.Evidence["growing_category"]; got != "activation (2.44 GiB of it allocated at the end from this line)" {
				t.Errorf("leak finding's growing_category %q", got)
			}
		}
	}
	if !found {
		t.Error("no leak finding")
	}
}

// TestReportSteady: the MLP+AdamW run's four steps peak alike, with the
// parameters, gradients and Adam state torch counts (134332416 bytes
// each for the first two, twice that for the state), and nothing grows;
// the peak finding names its largest categories.
func TestReportSteady(t *testing.T) {
	_, r, fs := report(t, "testdata/breakdown/out/mlp_adamw.pickle.gz")
	if len(r.Steps) != 4 {
		t.Fatalf("%d step summaries, want 4", len(r.Steps))
	}
	for _, s := range r.Steps {
		if s.Categories[Parameter] != 134332416 || s.Categories[Gradient] != 134332416 || s.Categories[OptimizerState] != 268664832 {
			t.Errorf("%s: %v", s.At.Label, s.Categories)
		}
	}
	if c, g := r.Growing(); c != "" {
		t.Errorf("%s grows by %d per step in a steady run", c, g)
	}
	want := "the peak is 256.22 MiB of optimizer state, 128.11 MiB of temporary and 128.11 MiB of parameter"
	if r.MadeOf() != "256.22 MiB of optimizer state, 128.11 MiB of temporary and 128.11 MiB of parameter" {
		t.Errorf("made of %q", r.MadeOf())
	}
	for _, f := range fs {
		if f.Kind == diagnose.KindPeak && f.Evidence["made_of"] != want {
			t.Errorf("peak finding made_of %q, want %q", f.Evidence["made_of"], want)
		}
	}
}

// TestTableByRule: at the end of the MLP+AdamW run the parameters are
// all the module _apply rule's, and the gradients the backward rule's.
func TestTableByRule(t *testing.T) {
	b, _, _ := report(t, "testdata/breakdown/out/mlp_adamw.pickle.gz")
	tab := b.Table(b.Timeline().Len()-1, ByRule)
	want := map[string]int64{}
	for _, r := range tab.Rows {
		switch {
		case strings.HasPrefix(r.Name, "stack.module_apply: frame _apply ("):
			want["parameter"] += r.Bytes
		case r.Name == "phase.backward_kept: allocated in backward, kept to the end of the trace; parameter-sized":
			want["gradient"] += r.Bytes
		}
	}
	if want["parameter"] != 134332416 || want["gradient"] != 134332416 {
		t.Errorf("by rule: %v", tab.Rows)
	}
}

// reportOfAll is the report of tl's moments as a breakdown of every block
// takes it, each moment's blocks found by the timeline: what Report, which
// labels only the blocks live at them, must return. live is those blocks.
func reportOfAll(ev *Events, tl *replay.Timeline, steps diagnose.Steps) (want Report, live []span) {
	m := reportMoments(tl, steps)
	at, _ := ascending(m.events())
	all := ev.Classify(tl)
	want = all.report(m, all.summaries(m.events()), tl.AllocatedAt(m.ats[0].Event), tl.AllocatedAt(m.ats[1].Event))
	return want, spans(tl, at)
}

// TestReportLabelsLive checks that Report, which labels only the blocks
// its moments count, reports what a breakdown of every block reports at
// them, on every fixture and on the breakdown's recordings (FSDP, KV
// cache, Llama training, AdamW), with the built-in rules and with a
// user's rule (which labels every block), and that on most traces of
// 1,000 blocks or more it labels fewer than half: 6,568 of the bench
// seed's 100,178.
func TestReportLabelsLive(t *testing.T) {
	f, _ := callsite.NewFilter("", "")
	mine, err := ParseRules(strings.NewReader("mine frame forward\n"))
	if err != nil {
		t.Fatal(err)
	}
	devices := slices.Collect(replaytest.Fixtures(t))
	recordings, _ := filepath.Glob(filepath.Join("..", "testdata", "breakdown", "out", "*.pickle.gz"))
	if len(recordings) < 4 {
		t.Fatalf("%d breakdown recordings, want the 4 in the repository", len(recordings))
	}
	for _, file := range recordings {
		sn := testutil.Snapshot(t, file)
		tl, err := replay.Device(sn, 0)
		if err != nil {
			t.Fatal(err)
		}
		devices = append(devices, replaytest.Device{File: file, Sn: sn, Tl: tl})
	}
	big, fewer, user := 0, 0, 0
	for _, d := range devices {
		sn, tl := d.Sn, d.Tl
		steps := diagnose.DetectSteps(sn, tl, f)
		var live []span
		for _, rules := range [][]Rule{nil, mine} {
			ev := ReadEvents(sn, tl.Device, tl.Trace, Options{Filter: f, Rules: rules})
			var want Report
			want, live = reportOfAll(ev, tl, steps)
			if got := ev.Report(tl, steps); !reflect.DeepEqual(got, want) {
				t.Errorf("%s device %d, rules %v: the report of the live blocks differs from that of all:\n got %+v\nwant %+v", d.File, tl.Device, rules, got, want)
			}
			if _, ok := want.Peak.Categories["mine"]; ok {
				user++
			}
		}
		if n := tl.NumAllocations(); n >= 1000 {
			big++
			if 2*len(live) < n {
				fewer++
			}
		}
		if strings.HasSuffix(d.File, "bench_source.pickle.gz") && len(live) != 6568 {
			t.Errorf("bench seed: %d blocks live at the report's moments, want 6568", len(live))
		}
	}
	if 2*fewer <= big || user < 10 {
		t.Errorf("%d of %d traces of 1,000 blocks or more had fewer than half live at the report's moments, %d reports list a user's category; want most and 10+", fewer, big, user)
	}
}
