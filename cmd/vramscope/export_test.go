package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
)

// TestExport writes both formats from one run and checks that each file is
// what its viewer expects: a gzip stream for pprof (the pprofout tests
// parse it), one JSON object for Perfetto.
func TestExport(t *testing.T) {
	fromRepoRoot(t)
	dir := t.TempDir()
	prof, trace := filepath.Join(dir, "out.pb.gz"), filepath.Join(dir, "out.json")
	code, stdout, stderr := runCmd("export", "testdata/scenarios/out/two_procs/step4/actor_rank0_pid750.pickle.gz",
		"--pprof", prof, "--at", "peak", "--perfetto", trace, "--device", "0")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing: the outputs are files", stdout)
	}
	for _, want := range []string{"wrote " + prof, "at peak", "wrote " + trace} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	data, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Errorf("%s is not gzipped", prof)
	}
	data, err = os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", trace, err)
	}
	if len(doc.TraceEvents) == 0 || doc.TraceEvents[0].Args["name"] != "testdata/scenarios/out/two_procs/step4/actor_rank0_pid750.pickle.gz (rank 0, pid 750)" {
		t.Errorf("first event %+v, want the process name", doc.TraceEvents[0])
	}
}

func TestExportErrors(t *testing.T) {
	fromRepoRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	good := "snapshot/testdata/format/pending.pickle"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no output", []string{"export", good}, exitUsage, "give --pprof, --perfetto or both"},
		{"bad moment", []string{"export", good, "--pprof", out, "--at", "start"}, exitUsage, `unknown moment "start"`},
		{"pprof of two files", []string{"export", good, "snapshot/testdata/format/train.pickle", "--pprof", out},
			exitUsage, "needs exactly one snapshot, got 2"},
		{"missing file", []string{"export", "nope.pickle", "--perfetto", out}, exitInputError, "nope.pickle: no such file"},
		{"no such device", []string{"export", good, "--perfetto", out, "--device", "7"}, exitInputError, "no input has device 7"},
		{"unwritable output", []string{"export", good, "--perfetto", filepath.Join(dir, "no", "dir.json")}, exitInputError,
			"writing " + filepath.Join(dir, "no", "dir.json") + ": no such file or directory"},
		{"output is a directory", []string{"export", good, "--pprof", dir}, exitInputError, "writing " + dir + ": is a directory"},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(tt.args...)
		if code != tt.wantCode {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", tt.name, code, tt.wantCode, stderr)
		}
		if !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("%s: stderr %q, want it to contain %q", tt.name, stderr, tt.wantStderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: %s was written", tt.name, out)
		}
	}
}

// TestExportLeak checks that --at leak writes the leaking callsites' blocks
// at the end of the trace: the profile's total is the bytes the leaks hold
// there (steps' AtEnd of each leak site), and nothing else.
func TestExportLeak(t *testing.T) {
	fromRepoRoot(t)
	const step4 = "testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz"
	out := filepath.Join(t.TempDir(), "leak.pb.gz")
	if code, _, stderr := runCmd("export", step4, "--pprof", out, "--at", "leak"); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range p.Sample {
		total += s.Value[1] // inuse_space
	}

	sn, tls, err := loadDevices(inputs.Input{Path: step4}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	filter, err := callsite.NewFilter("", "")
	if err != nil {
		t.Fatal(err)
	}
	var leaked int64
	var sites []string
	for _, tl := range tls {
		r := diagnose.Leak(sn, tl, diagnose.DetectSteps(sn, tl, filter), filter)
		for _, s := range r.Sites {
			if s.Leak {
				leaked += s.AtEnd
				sites = append(sites, s.Site.Frame.Name)
			}
		}
	}
	// Block sizes: 4 logits tensors of 38.00 MiB, 4 masks of 1.16 MiB.
	if want := []string{"compute_next_token_logits", "allocate_vocab_mask"}; !slices.Equal(sites, want) {
		t.Fatalf("leak sites %q, want %q", sites, want)
	}
	if total != leaked || total != 4*39845888+4*1216512 {
		t.Errorf("profile total %d B, want the leaked %d B", total, leaked)
	}

	healthy := "testdata/scenarios/out/leak_fixed/step4/server_rank0_pid592.pickle.gz"
	if code, _, stderr := runCmd("export", healthy, "--pprof", out, "--at", "leak"); code != exitInputError || !strings.Contains(stderr, "no callsite leaks") {
		t.Errorf("no leak: exit %d, stderr %q; want exit 2 saying so", code, stderr)
	}
}

// TestExportCategoryLabel: a pprof export labels each sample with its
// breakdown category; summed by label at the end of the MLP+AdamW run they
// are torch's own counts (134332416 bytes of parameters and of gradients,
// twice that of Adam state).
func TestExportCategoryLabel(t *testing.T) {
	fromRepoRoot(t)
	out := filepath.Join(t.TempDir(), "mlp.pb.gz")
	if code, _, stderr := runCmd("export", "testdata/breakdown/out/mlp_adamw.pickle.gz", "--pprof", out, "--at", "end"); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Label["category"]) != 1 {
			t.Fatalf("sample without one category label: %v", s.Label)
		}
		by[s.Label["category"][0]] += s.Value[1]
	}
	for c, want := range map[string]int64{"parameter": 134332416, "gradient": 134332416, "optimizer_state": 268664832} {
		if by[c] != want {
			t.Errorf("%s: %d bytes, want %d (all: %v)", c, by[c], want, by)
		}
	}
}
