package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// analyze of inputs none of which could be read gives no verdict, in text
// and JSON, and exits 2.
func TestAnalyzeNothingRead(t *testing.T) {
	raw, err := os.ReadFile("../../snapshot/testdata/format/train.pickle")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pickle")
	if err := os.WriteFile(cut, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", cut}, "verdict: none (no input could be read)\n"},
		{[]string{"analyze", "--json", cut}, `"verdict": "none"`},
	} {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitInputError || !strings.Contains(stderr, "1 of 1 inputs could not be read") {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
		if !strings.Contains(stdout, c.want) || strings.Contains(stdout, "healthy") {
			t.Errorf("%v: stdout %q, want %q and no healthy", c.args, stdout, c.want)
		}
	}
}

// A file that outgrows the decoder's memory budget is an unreadable input
// like any other: its error names it, where it broke and what grew; the
// other inputs are still analyzed, and the exit status is 2.
func TestAnalyzeOverBudget(t *testing.T) {
	hostile := filepath.Join(t.TempDir(), "lists.pickle")
	if err := os.WriteFile(hostile, []byte("\x80\x04"+strings.Repeat("]", 2_000_000)+"."), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd("analyze", "../../snapshot/testdata/format/train.pickle", hostile)
	if code != exitInputError {
		t.Errorf("exit %d, want %d", code, exitInputError)
	}
	if !strings.Contains(stdout, "verdict: ") || strings.Contains(stdout, "verdict: none") {
		t.Errorf("the readable input was not analyzed: %q", stdout)
	}
	want := hostile + ": decoding snapshot: pickle: offset 65521: opcode EMPTY_LIST (0x5d): opening a container: open containers outgrew the memory budget"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}
