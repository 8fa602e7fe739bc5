package snapshot

import (
	"os"
	"syscall"
	"unsafe"
)

// mapping is a mapping of a file: read-only, or writable for a
// decompressor's output (mapOutput).
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

// mapOutput maps the first size bytes of f, which it sizes so, writable
// and shared: what is written there is the file's.
func mapOutput(f *os.File, size int64) (*mapping, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, errNoMapping
	}
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// The decompressor's matches read back anywhere in its window, and
	// the default advice maps 16 pages around each page they fault in
	// again: analyze of a 288 MB `zstd --long=27` file peaked at 157-195
	// thousand KiB as it decompressed, against 77-79 so (2-core dev VM).
	// An error costs only that memory.
	_ = syscall.Madvise(b, syscall.MADV_RANDOM)
	return &mapping{b: b}, nil
}

// written is how far a writer that fills m from the start has come, as
// far as from or further: the end of the last page of the file at or past
// from that the page cache holds. It holds the pages written, whether or
// not they are still mapped (release), and none past them in a file that
// was empty there. vec is room for mincore's answer, a byte a page.
func (m *mapping) written(from int64, vec []byte) int64 {
	page := int64(os.Getpagesize())
	from = from / page * page
	n := min(int64(len(vec)), (int64(len(m.b))-from+page-1)/page)
	if n <= 0 {
		return from
	}
	span := m.b[from:min(int64(len(m.b)), from+n*page)]
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&span[0])), uintptr(len(span)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return from
	}
	for i := n - 1; i >= 0; i-- {
		if vec[i]&1 != 0 {
			return min(int64(len(m.b)), from+(i+1)*page)
		}
	}
	return from
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
