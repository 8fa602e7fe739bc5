package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
