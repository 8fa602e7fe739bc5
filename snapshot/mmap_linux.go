package snapshot

import (
	"os"
	"syscall"
)

// mapping is a read-only mapping of a file.
type mapping struct{ b []byte }

// mapFile maps the first size bytes of f.
func mapFile(f *os.File, size int64) (*mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errNoMapping
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &mapping{b: b}, nil
}

// release lets the pages that lie wholly within from..to go: they stay in
// the page cache, and a later read maps them again, but they no longer
// count in the process's resident memory.
func (m *mapping) release(from, to int64) {
	page := int64(os.Getpagesize())
	from, to = (from+page-1)/page*page, to/page*page
	if from < to {
		// An error costs only memory: the pages stay mapped.
		_ = syscall.Madvise(m.b[from:to], syscall.MADV_DONTNEED)
	}
}

func (m *mapping) close() error { return syscall.Munmap(m.b) }
