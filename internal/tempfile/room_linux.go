package tempfile

import "syscall"

// Filesystems whose files live in memory (statfs(2)).
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// diskFree is the space free to an unprivileged writer on dir's
// filesystem; ok is false for a filesystem in memory, or if it cannot be
// told.
func diskFree(dir string) (free int64, ok bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, false
	}
	if t := int64(st.Type); t == tmpfsMagic || t == ramfsMagic {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
