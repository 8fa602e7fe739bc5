// Package tempfile makes the temporary files that big inputs are read
// through: a compressed snapshot decompressed, standard input copied, so
// that a file of known size can be decoded in parts. Such a file is
// unlinked as soon as it is made, and made only where the disk has room.
package tempfile

import "os"

// Create makes a new file in dir (os.CreateTemp's pattern) and unlinks it
// at once: it lasts while it is open, and nothing is left behind if the
// process dies.
func Create(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Room is the most bytes a temporary file in dir may take: none on a
// filesystem in memory, where the file would take the memory that reading
// it from a file saves, and otherwise as much as leaves as much again
// free after it, and 1 GiB at least, so that other writers are not left
// short.
func Room(dir string) int64 {
	free, ok := diskFree(dir)
	if !ok {
		return 0
	}
	return max(0, min(free/2, free-1<<30))
}
