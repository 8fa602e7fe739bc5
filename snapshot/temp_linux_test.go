package snapshot

import (
	"syscall"
	"testing"
)

// A directory takes a temporary file with as much room again after it,
// and none in memory.
func TestRoomFor(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	inMemory := int64(st.Type) == tmpfsMagic || int64(st.Type) == ramfsMagic
	if got := roomFor(dir, 1<<20); got == inMemory {
		t.Errorf("1 MiB in %s (in memory: %v): %v", dir, inMemory, got)
	}
	if roomFor(dir, 1<<60) {
		t.Errorf("1 EiB fits in %s", dir)
	}
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic && roomFor("/dev/shm", 1<<20) {
		t.Error("a file would go to /dev/shm, which is in memory")
	}
}
