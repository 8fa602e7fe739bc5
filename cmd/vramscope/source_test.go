package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
)

// TestMain turns source quotes off: the goldens' fixtures name files (the
// scenario scripts under /work/main) that exist on some machines only.
func TestMain(m *testing.M) {
	sources = nil
	os.Exit(m.Run())
}

// TestFindingQuotesSource: a finding's origin and callsite lines are quoted
// when their files exist, and printed bare when they do not.
func TestFindingQuotesSource(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "loss_utils.py")
	if err := os.WriteFile(lib, []byte("def ForCausalLMLoss(logits):\n    logits = logits.float()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := sources
	defer func() { sources = saved }()
	sources = &callsite.Source{}
	f := diagnose.Finding{
		Kind: diagnose.KindPeak, Severity: diagnose.High, Title: "t",
		Origin:   &diagnose.Frame{Function: "ForCausalLMLoss", File: lib, Line: 2},
		Callsite: &diagnose.Frame{Function: "train_step", File: filepath.Join(dir, "absent.py"), Line: 75},
		Evidence: map[string]any{},
	}
	var b strings.Builder
	writeFinding(&b, 1, f, "")
	for _, want := range []string{
		"allocated in ForCausalLMLoss (" + lib + ":2): `logits = logits.float()`\n",
		"at train_step (" + filepath.Join(dir, "absent.py") + ":75)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("finding text lacks %q:\n%s", want, b.String())
		}
	}
}
