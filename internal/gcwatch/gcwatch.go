// Package gcwatch tells of the garbage collector's collections as they
// end: the memory gate sets its limit from the live heap each one left
// (cmd/vramscope), and bench/phases keeps the heap profile of the one
// that left the most.
package gcwatch

import "runtime"

// Each calls f once the next collection has ended, and again after each
// one after while f returns true. f runs on the runtime's cleanup
// goroutine, one call at a time: it must not wait on anything that waits
// for a collection.
func Each(f func() bool) {
	runtime.AddCleanup(new(mark), func(f func() bool) {
		if f() {
			Each(f)
		}
	}, f)
}

// mark is what the collector frees to tell a collection's end: nothing
// holds it, and it holds a pointer so that it is not allocated beside
// small objects whose lives would delay its cleanup.
type mark struct{ _ *byte }
