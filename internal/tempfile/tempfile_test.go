package tempfile

import (
	"os"
	"path/filepath"
	"testing"
)

// A temporary file is gone from its directory at once, yet readable and
// writable while open.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(dir, "vramscope-*.pickle")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("files left in %s: %v", dir, left)
	}
	if _, err := f.WriteString("kept while open"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 5); err != nil || string(b) != "while"[:4] {
		t.Errorf("read back %q, %v", b, err)
	}
	if _, err := Create(filepath.Join(dir, "missing"), "x-*"); !os.IsNotExist(err) {
		t.Errorf("Create in a missing directory: %v, want not-exist", err)
	}
}
