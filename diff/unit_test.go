package diff

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/inputs"
)

func TestParseMoment(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Moment
		ok   bool
	}{
		{"peak", Moment{Kind: Peak}, true},
		{"", Moment{Kind: Peak}, true},
		{"END", Moment{Kind: End}, true},
		{"step 3", Moment{Kind: Step, Step: 3}, true},
		{"step3", Moment{Kind: Step, Step: 3}, true},
		{"step=12", Moment{Kind: Step, Step: 12}, true},
		{"step", Moment{}, false},
		{"step -1", Moment{}, false},
		{"middle", Moment{}, false},
	} {
		got, err := ParseMoment(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseMoment(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestLabelNumber(t *testing.T) {
	for label, want := range map[string]int{
		"train_step#3": 3, "step=3": 3, "Optimizer.step#Adam.step (3)": 3, "period 12": 12, "ProfilerStep#0": 0, "warm-up": -1,
	} {
		if got := labelNumber(label); got != want {
			t.Errorf("labelNumber(%q) = %d, want %d", label, got, want)
		}
	}
}

// groups builds one side's groups: name -> bytes, with a loose key.
func groups(sizes map[string]int64, loose map[string]string) map[string]*group {
	out := map[string]*group{}
	for name, n := range sizes {
		out[name] = &group{name: name, bytes: n, blocks: 1, loose: loose[name]}
	}
	return out
}

func TestNewTable(t *testing.T) {
	a := groups(map[string]int64{"same": 100, "grows": 10, "shrinks": 50, "gone": 7, "old.py:f": 30, "tiny": 1}, map[string]string{"old.py:f": ":f"})
	b := groups(map[string]int64{"same": 100, "grows": 60, "shrinks": 20, "new": 5, "new.py:f": 30, "tiny": 2}, map[string]string{"new.py:f": ":f"})
	tb := newTable(a, b, 4)
	var got []string
	for _, r := range tb.Rows {
		got = append(got, string(r.Change)+" "+r.Name)
	}
	// By absolute difference: +50, -30, -7, +5; +1 goes to the rest.
	want := []string{"grown grows", "shrunk shrinks", "removed gone", "added new"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if tb.Rest != (Rest{Rows: 1, ABytes: 1, BBytes: 2, DeltaBytes: 1}) {
		t.Errorf("rest %+v", tb.Rest)
	}
	// same, and f in a renamed file, joined by its loose key.
	if tb.Unchanged != 2 || tb.UnchangedBytes != 130 {
		t.Errorf("unchanged %d, %d bytes; want 2, 130", tb.Unchanged, tb.UnchangedBytes)
	}
	all := newTable(a, b, 0)
	if len(all.Rows) != 5 || all.Rest.Rows != 0 {
		t.Errorf("top 0: %d rows, rest %d; want every changed row", len(all.Rows), all.Rest.Rows)
	}
	// A loose key shared by two groups of a side joins nothing.
	a2 := groups(map[string]int64{"x.py:f": 1, "y.py:f": 2}, map[string]string{"x.py:f": ":f", "y.py:f": ":f"})
	b2 := groups(map[string]int64{"z.py:f": 3}, map[string]string{"z.py:f": ":f"})
	if tb := newTable(a2, b2, 0); len(tb.Rows) != 3 {
		t.Errorf("ambiguous rename: %d rows, want 3 apart", len(tb.Rows))
	}
}

func TestSettingValue(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{true, "True"},
		{"", `""`},
		{int64(-1), "-1"},
		{0.6, "0.6"},
		{map[string]any{"16": int64(4), "2": int64(0), "1024": int64(8)}, "{2: 0, 16: 4, 1024: 8}"},
		{[]any{int64(1), "a"}, `[1, "a"]`},
	} {
		if got := settingValue(c.v); got != c.want {
			t.Errorf("settingValue(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

// in is an input named as a run's dump would be.
func in(path string) inputs.Input {
	return inputs.Input{Path: path, Kind: inputs.Snapshot, Identity: inputs.ParseIdentity(path)}
}

func TestProcessesAndMatch(t *testing.T) {
	a := Processes([]inputs.Input{
		in("a/step2/actor_rank0_pid10.pickle"), in("a/step2/actor_rank1_pid11.pickle"),
		in("a/step4/actor_rank0_pid10.pickle"), in("a/step4/actor_rank1_pid11.pickle"),
		in("a/step4/critic_rank2_pid12.pickle"),
	})
	b := Processes([]inputs.Input{
		in("b/step4/actor_rank0_pid90.pickle"), in("b/step4/actor_rank1_pid91.pickle"),
		in("b/step4/judge_rank2_pid92.pickle"), in("b/step4/judge_rank3_pid93.pickle"),
	})
	if len(a) != 3 || a[0].Name != "actor/rank0" || len(a[0].Inputs) != 2 {
		t.Fatalf("processes of A: %+v", a)
	}
	pairs, unmatched := Match(a, b)
	var got []string
	for _, p := range pairs {
		got = append(got, p[0].Name+"="+p[1].Name)
	}
	// By tag and rank, then by rank alone (the tag changed), in A's order.
	if want := []string{"actor/rank0=actor/rank0", "actor/rank1=actor/rank1", "critic/rank2=judge/rank2"}; !slices.Equal(got, want) {
		t.Errorf("pairs %q, want %q", got, want)
	}
	if !slices.Equal(unmatched, []string{"B: judge/rank3 (no such process in A)"}) {
		t.Errorf("unmatched %q", unmatched)
	}
	// Two single files of different names are one pair.
	pairs, unmatched = Match(Processes([]inputs.Input{in("x/peak_upcast.pickle.gz")}), Processes([]inputs.Input{in("y/peak_chunked.pickle.gz")}))
	if len(pairs) != 1 || len(unmatched) != 0 || pairs[0][0].Name != "peak_upcast" {
		t.Errorf("single files: %+v, %q", pairs, unmatched)
	}
}

func TestPick(t *testing.T) {
	p := Processes([]inputs.Input{in("r/step2/s_rank0_pid1.pickle"), in("r/step3/s_rank0_pid1.pickle"), in("r/step4/s_rank0_pid1.pickle")})[0]
	for _, c := range []struct {
		m    Moment
		path string
		step int
	}{
		{Moment{Kind: Peak}, "r/step4/s_rank0_pid1.pickle", 4},
		{Moment{Kind: Step, Step: 3}, "r/step3/s_rank0_pid1.pickle", 3},
		// No dump of step 1: the last snapshot, in whose trace it is looked for.
		{Moment{Kind: Step, Step: 1}, "r/step4/s_rank0_pid1.pickle", 4},
	} {
		got, step := p.Pick(c.m)
		if got.Path != c.path || step == nil || *step != c.step {
			t.Errorf("Pick(%v) = %s, step %v; want %s, %d", c.m, got.Path, step, c.path, c.step)
		}
	}
	if _, err := p.Dump(7); err == nil || err.Error() != "s/rank0: no snapshot of step 7 (steps 2, 3, 4)" {
		t.Errorf("Dump(7): %v", err)
	}
}

// The capture hook's notes name the torch version of each dump, by its
// path relative to the output folder; a gzipped copy is still its dump.
func TestTorchVersionFromHookNotes(t *testing.T) {
	out := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".vramscope/dumps-7.jsonl", `{"path": "step2/t_rank0_pid7.pickle", "torch_version": "2.10.0"}`+"\n"+
		`{"path": "step3/t_rank0_pid7.pickle", "torch_version": "2.11.0+cu130"}`+"\n")
	write("step3/t_rank0_pid7.pickle.gz", "")
	write("step5/t_rank0_pid7.pickle", "")
	if v := TorchVersion(filepath.Join(out, "step3/t_rank0_pid7.pickle.gz")); v != "2.11.0+cu130" {
		t.Errorf("step 3: %q", v)
	}
	if v := TorchVersion(filepath.Join(out, "step5/t_rank0_pid7.pickle")); v != "" {
		t.Errorf("a dump without a note: %q", v)
	}
	if v := TorchVersion(filepath.Join(scenarios, "peak_upcast/peak_upcast.pickle.gz")); v != "2.11.0+cu130" {
		t.Errorf("the scenario's sidecar: %q", v)
	}
}

func TestSummarize(t *testing.T) {
	rows := &Table{Rows: []Row{{Name: "f (a.py)", DeltaBytes: 3 << 20, Change: Grown}}}
	cats := &Table{Rows: []Row{{Name: "activation", DeltaBytes: -(1 << 20), Change: Shrunk}}}
	for _, c := range []struct {
		d    Device
		want string
	}{
		{Device{A: DeviceSide{Device: 0}, B: DeviceSide{Device: 0}, Delta: Totals{AllocatedBytes: 2 << 20, ReservedBytes: -(4 << 20)}, Callsites: rows, Categories: cats, Modules: &Table{}},
			"B holds 2.00 MiB more allocated memory than A and reserves 4.00 MiB less; the largest difference: f (a.py), +3.00 MiB, grown; by category activation, -1.00 MiB, shrunk"},
		{Device{A: DeviceSide{Device: 1}, B: DeviceSide{Device: 1}},
			"B holds as much allocated memory as A"},
		{Device{A: DeviceSide{Device: -1}, B: DeviceSide{Device: 2, Totals: Totals{AllocatedBytes: 1 << 30}}, Delta: Totals{AllocatedBytes: 1 << 30, ReservedBytes: 1 << 30}},
			"only B has this device: 1.00 GiB allocated"},
	} {
		if got := summarize(c.d); got != c.want {
			t.Errorf("summarize:\n got %s\nwant %s", got, c.want)
		}
	}
}
