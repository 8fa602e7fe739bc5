package tempfile

import (
	"syscall"
	"testing"
)

// A directory takes a temporary file with as much room again after it,
// and none in memory.
func TestRoom(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	want := max(0, min(free/2, free-1<<30))
	if inMemory := int64(st.Type) == tmpfsMagic || int64(st.Type) == ramfsMagic; inMemory {
		want = 0
	}
	// Others may write to the disk meanwhile: a MiB either way.
	if got := Room(dir); got < want-1<<20 || got > want+1<<20 {
		t.Errorf("Room(%s) = %d, want %d (%d free)", dir, got, want, free)
	}
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic && Room("/dev/shm") != 0 {
		t.Error("a file would go to /dev/shm, which is in memory")
	}
	if got := Room("/no/such/dir"); got != 0 {
		t.Errorf("Room of a missing directory = %d, want 0", got)
	}
}
