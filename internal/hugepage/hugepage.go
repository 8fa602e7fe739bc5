// Package hugepage asks the kernel to back large, long-lived buffers with
// transparent huge pages, which Linux by default (THP "madvise" mode) gives
// only on request and Go's runtime does not request.
//
// Why: decoding and replaying a 1 GB snapshot touches about 1 GB of fresh
// memory, and each first touch of a 4 KiB page is a page fault (2.7 us each
// on the 2-core benchmark VM: 401 k faults, 1.07 s of system time in one
// bench/phases run). A 2 MiB page takes one fault for 512 of them.
package hugepage

import "unsafe"

// size is the huge page size of x86-64 and arm64 (4 KiB base pages).
const size = 2 << 20

// Advise asks for huge pages under the whole 2 MiB pages that s spans (its
// capacity, not its length). It only helps before s is first written:
// pages already touched stay small. Buffers smaller than a few MiB gain
// nothing; errors are ignored, as the advice is only a hint.
func Advise[T any](s []T) {
	s = s[:cap(s)]
	if len(s) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(s[0]))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := (start+size-1)&^(size-1), (start+uintptr(len(b)))&^(size-1)
	if lo < hi {
		advise(b[lo-start : hi-start])
	}
}
