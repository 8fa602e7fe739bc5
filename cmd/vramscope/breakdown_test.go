package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBreakdownGolden runs breakdown on the H100 ground-truth runs: the
// text table at the peak, by module at the end of the KV-cache run, and
// the JSON at step 2 of the MLP run.
func TestBreakdownGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	cases := []struct {
		name string
		args []string
	}{
		{"breakdown-llama_train.txt", []string{"breakdown", "testdata/breakdown/out/llama_train.pickle.gz"}},
		{"breakdown-kv_generate-module.txt", []string{"breakdown", "--at", "end", "--by", "module", "testdata/breakdown/out/kv_generate.pickle.gz"}},
		{"breakdown-mlp_adamw-step2.json", []string{"breakdown", "--at", "step 2", "--json", "testdata/breakdown/out/mlp_adamw.pickle.gz"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d, want 0; stderr:\n%s", c.name, code, stderr)
		}
		checkGolden(t, golden, c.name, stdout)
	}
}

// TestBreakdownJSON checks the documented JSON shape and torch's numbers:
// at the end of the MLP+AdamW run the objects hold 134332416 bytes of
// parameters and as many of gradients, twice that of optimizer state.
func TestBreakdownJSON(t *testing.T) {
	fromRepoRoot(t)
	code, stdout, stderr := runCmd("breakdown", "--at", "end", "--json", "testdata/breakdown/out/mlp_adamw.pickle.gz")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Version int `json:"version"`
		Devices []struct {
			Device     int              `json:"device"`
			At         map[string]any   `json:"at"`
			TotalBytes int64            `json:"total_bytes"`
			Categories map[string]int64 `json:"categories"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || len(doc.Devices) != 1 {
		t.Fatalf("version %d, %d devices", doc.Version, len(doc.Devices))
	}
	d := doc.Devices[0]
	if len(d.Categories) != 13 || d.At["label"] != "end" {
		t.Errorf("categories %v, at %v: want all 13 names, at end", d.Categories, d.At)
	}
	var sum int64
	for _, v := range d.Categories {
		sum += v
	}
	if sum != d.TotalBytes || d.TotalBytes != 605487104 { // torch's memory_allocated at the dump
		t.Errorf("total %d, categories sum %d; torch's memory_allocated 605487104", d.TotalBytes, sum)
	}
	for c, want := range map[string]int64{"parameter": 134332416, "gradient": 134332416, "optimizer_state": 268664832} {
		if d.Categories[c] != want {
			t.Errorf("%s %d, want %d", c, d.Categories[c], want)
		}
	}
}

// TestBreakdownRules: a user rule names its own category, first.
func TestBreakdownRules(t *testing.T) {
	fromRepoRoot(t)
	rules := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(rules, []byte("# Adam's moments\nadam_moments frame ^_init_group \\(.*adam\\.py:(178|182)\\)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd("breakdown", "--at", "end", "--json", "--rules", rules, "testdata/breakdown/out/mlp_adamw.pickle.gz")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Devices []struct {
			Categories map[string]int64 `json:"categories"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Devices[0].Categories
	if c["adam_moments"] != 268664832 || c["optimizer_state"] != 0 {
		t.Errorf("adam_moments %d, optimizer_state %d: want 268664832 and 0", c["adam_moments"], c["optimizer_state"])
	}
	code, _, stderr = runCmd("breakdown", "--rules", filepath.Join(t.TempDir(), "missing"), "testdata/breakdown/out/mlp_adamw.pickle.gz")
	if code == exitOK {
		t.Errorf("a missing rules file: exit 0, stderr %s", stderr)
	}
}

// TestBreakdownErrors: a bad --at or --by is a usage error before any
// file is read; a step the file does not have is that file's error.
func TestBreakdownErrors(t *testing.T) {
	fromRepoRoot(t)
	const mlp = "testdata/breakdown/out/mlp_adamw.pickle.gz"
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--at", "soon", mlp}, exitUsage, `--at "soon": want peak, end, step N or an event index`},
		{[]string{"--at", "step 0", mlp}, exitUsage, "N from 1"},
		{[]string{"--by", "file", mlp}, exitUsage, `--by "file"`},
		{[]string{"--at", "step 9", mlp}, exitInputError, "device 0 has 4 steps"},
		{[]string{"--at", "99999", mlp}, exitInputError, "device 0 has events 0 to 1240"},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(append([]string{"breakdown"}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}
