package analyze

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/testutil"
)

// TestOneTraceDeepModel analyzes single snapshots of a deep model recorded
// on an H100 (testdata/scenarios/*_deep*.py): one grad-enabled forward of
// 32 layers is healthy, with a note that its layers are no steps; five
// training iterations leaking the LM head's logits are a leak of that
// line, 500 MiB per iteration (expected.json leak_bytes_per_step).
func TestOneTraceDeepModel(t *testing.T) {
	tests := []struct {
		file    string
		verdict Verdict
		leak    string // the leaking callsite, "" for none
		perStep int64
		note    string
	}{
		{"forward_deep/forward_deep.pickle.gz", Healthy, "", 0, "device 0: one pass, no steps: the 32 repeats"},
		{"train_deep/train_deep.pickle.gz", Healthy, "", 0, ""},
		{"train_deep_leak/train_deep_leak.pickle.gz", Leak, "forward (/work/main/testdata/scenarios/_deep.py:56)", 500 << 20, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("..", "testdata", "scenarios", "out", tt.file)
			a := New(Options{})
			a.AddSnapshot(inputs.Input{Path: path, Kind: inputs.Snapshot}, testutil.Snapshot(t, path))
			r := a.Report()
			if len(r.Processes) != 1 {
				t.Fatalf("%d processes", len(r.Processes))
			}
			p := r.Processes[0]
			var leaks []diagnose.Finding
			for _, f := range p.Findings {
				if f.Kind == diagnose.KindLeak {
					leaks = append(leaks, f)
				}
			}
			if p.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s", p.Verdict, tt.verdict)
			}
			switch {
			case tt.leak == "" && len(leaks) > 0:
				t.Errorf("leaks: %s", leaks[0].Title)
			case tt.leak != "" && (len(leaks) != 1 || leaks[0].Callsite == nil || leaks[0].BytesPerStep != tt.perStep ||
				siteString(*leaks[0].Callsite) != tt.leak):
				t.Errorf("leaks %+v, want one at %s of %d per step", leaks, tt.leak, tt.perStep)
			}
			if tt.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tt.note) {
				t.Errorf("notes %q lack %q", p.Notes, tt.note)
			}
		})
	}
}

func siteString(f diagnose.Frame) string {
	return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
}
