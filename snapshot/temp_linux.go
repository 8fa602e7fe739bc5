package snapshot

import "syscall"

// Filesystems whose files live in memory (statfs(2)).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// roomFor reports whether dir can take a temporary file of n bytes: on a
// filesystem not in memory, where a file would take the memory that
// decoding it in parts saves, and with as much again free after it (1 GiB
// at least), so that other writers are not left short.
func roomFor(dir string, n int64) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return false
	}
	if t := int64(st.Type); t == tmpfsMagic || t == ramfsMagic {
		return false
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	return free-n >= max(n, 1<<30)
}
