package callsite

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSourceLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "loss_utils.py")
	if err := os.WriteFile(file, []byte("def ForCausalLMLoss(logits):\n    logits = logits.float()\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var src Source
	tests := []struct {
		file string
		line uint64
		want string
		ok   bool
	}{
		{file, 2, "logits = logits.float()", true},
		{file, 3, "", false}, // blank
		{file, 9, "", false}, // past the end
		{file, 0, "", false},
		{filepath.Join(t.TempDir(), "absent.py"), 1, "", false},
		{t.TempDir(), 1, "", false}, // a folder
	}
	for _, tt := range tests {
		got, ok := src.Line(tt.file, tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Line(%s, %d) = %q, %v; want %q, %v", tt.file, tt.line, got, ok, tt.want, tt.ok)
		}
	}
}
