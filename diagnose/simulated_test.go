package diagnose

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSimulatedAdvice: the OOM and fragmentation findings carry the
// setting the allocator model finds best, with what the recorded variants
// of the same program really did: frag_oom under expandable_segments:True
// ran without an OOM (frag_oom_expandable), and frag_growth's reserved
// peak under it was 587202560 B (frag_growth_expandable's recorded peak).
func TestSimulatedAdvice(t *testing.T) {
	tests := []struct {
		fixture  string
		kind     Kind
		setting  string
		reserved int64
		sentence string
	}{
		{"frag_oom/frag_oom.pickle.gz", KindOOM, "expandable_segments:True", 0, "the OOM at event 34 would not have happened"},
		{"frag_growth/step4/rollout_rank0_pid656.pickle.gz", KindFragmentation, "expandable_segments:True", 587202560, "the reserved peak would have been 560.00 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			sn, tl := stepsScenario(t, filepath.Join(scenarioDir, tt.fixture))
			r, err := Explain(sn, tl, testFilter(t))
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, fd := range r.Findings {
				if fd.Kind != tt.kind {
					continue
				}
				found = true
				if fd.Evidence["simulated_setting"] != tt.setting || fd.Evidence["simulated_oom"] != false {
					t.Errorf("%s finding: simulated %v (oom %v), want %s without an OOM", fd.Kind, fd.Evidence["simulated_setting"], fd.Evidence["simulated_oom"], tt.setting)
				}
				if got, _ := fd.Evidence["simulated_reserved_peak_bytes"].(uint64); tt.reserved > 0 && int64(got) != tt.reserved {
					t.Errorf("simulated reserved peak %v, want %d", fd.Evidence["simulated_reserved_peak_bytes"], tt.reserved)
				}
				if !strings.Contains(fd.Fix, tt.sentence) {
					t.Errorf("fix %q lacks %q", fd.Fix, tt.sentence)
				}
			}
			if !found {
				t.Errorf("no %s finding", tt.kind)
			}
		})
	}
}

// TestAdviceDue: on every fixture, each device with an OOM or
// fragmentation finding passes AdviceDue (it is what lets the report skip
// the model's replays on the others), and some devices do not.
func TestAdviceDue(t *testing.T) {
	f := testFilter(t)
	var due, advised, skipped int
	for _, file := range fixtureFiles(t) {
		sn, tls := replayFile(t, file)
		for _, tl := range tls {
			if tl.Len() == 0 {
				continue
			}
			r, err := Explain(sn, tl, f)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			wants := slices.ContainsFunc(r.Findings, func(fd Finding) bool { return fd.Kind == KindOOM || fd.Kind == KindFragmentation })
			ok := AdviceDue(sn, tl)
			if wants && !ok {
				t.Errorf("%s cuda:%d: an OOM or fragmentation finding, but AdviceDue is false", file, tl.Device)
			}
			switch {
			case !ok:
				skipped++
			case wants:
				advised++
			default:
				due++
			}
		}
	}
	t.Logf("%d devices with OOM or fragmentation findings, %d more pass AdviceDue, %d skipped", advised, due, skipped)
	if skipped == 0 || advised == 0 {
		t.Errorf("AdviceDue passed %d devices with findings and skipped %d: it tells nothing apart", advised, skipped)
	}
}

// TestAdviceKept: the report's builder and the analyzer ask for the same
// snapshot's advice; the dozen replays behind it run once.
func TestAdviceKept(t *testing.T) {
	sn, tl := stepsScenario(t, filepath.Join(scenarioDir, "frag_oom/frag_oom.pickle.gz"))
	f := testFilter(t)
	a, b := Advice(sn, tl, f), Advice(sn, tl, f)
	if a == nil || a != b {
		t.Fatalf("advice %p, then %p: want the same, computed once", a, b)
	}
	if a.Best.Name != "expandable_segments:True" {
		t.Errorf("best setting %s, want expandable_segments:True", a.Best.Name)
	}
}

// TestExplainAdvising: the model's advice goes on the findings of the kinds
// asked for alone; the findings themselves are Explain's.
func TestExplainAdvising(t *testing.T) {
	for _, tt := range []struct {
		fixture string
		kind    Kind
	}{
		{"frag_growth/step4/rollout_rank0_pid656.pickle.gz", KindFragmentation},
		{"frag_oom/frag_oom.pickle.gz", KindOOM},
	} {
		sn, tl := stepsScenario(t, filepath.Join(scenarioDir, tt.fixture))
		all, err := Explain(sn, tl, testFilter(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, advised := range [][]Kind{nil, {KindOOM}, {KindFragmentation}} {
			r, err := ExplainAdvising(sn, tl, testFilter(t), advised...)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Findings) != len(all.Findings) {
				t.Fatalf("%s advising %v: %d findings, Explain has %d", tt.fixture, advised, len(r.Findings), len(all.Findings))
			}
			for i, fd := range r.Findings {
				_, simulated := fd.Evidence["simulated_setting"]
				want := slices.Contains(advised, fd.Kind) && (fd.Kind == KindOOM || fd.Kind == KindFragmentation)
				if simulated != want || strings.Contains(fd.Fix, "Replayed through") != want {
					t.Errorf("%s advising %v: %s finding simulated %v, want %v", tt.fixture, advised, fd.Kind, simulated, want)
				}
				if fd.Kind != all.Findings[i].Kind || fd.Title != all.Findings[i].Title {
					t.Errorf("%s advising %v: finding %d is %q, Explain's %q", tt.fixture, advised, i, fd.Title, all.Findings[i].Title)
				}
				if want && fd.Fix != all.Findings[i].Fix {
					t.Errorf("%s advising %v: fix %q, Explain's %q", tt.fixture, advised, fd.Fix, all.Findings[i].Fix)
				}
			}
			if !slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Kind == tt.kind }) {
				t.Errorf("%s: no %s finding", tt.fixture, tt.kind)
			}
		}
	}
}
