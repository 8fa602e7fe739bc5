//go:build !linux

package hugepage

func advise(b []byte) {}
