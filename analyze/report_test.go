package analyze

import "testing"

// With no input read there is no verdict: not "healthy (0 processes)".
func TestNothingReadHasNoVerdict(t *testing.T) {
	rep := New(Options{}).Report()
	if rep.Verdict != NoVerdict || len(rep.Processes) != 0 {
		t.Errorf("verdict %q with %d processes, want %q", rep.Verdict, len(rep.Processes), NoVerdict)
	}
}
