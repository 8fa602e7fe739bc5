package follow

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// tail reads a file as it grows, as tail -F does: when the path names
// another file (the log was rotated) it finishes the old one and starts
// the new one from its beginning; when the file shrinks (truncated in
// place, as logrotate's copytruncate does) it starts again from the
// beginning; a path that does not exist yet is waited for.
type tail struct {
	path string
	log  func(format string, args ...any)
	f    *os.File
	info fs.FileInfo
	off  int64
	buf  []byte
}

// read feeds what was added since the last read.
func (t *tail) read(feed func([]byte)) error {
	if t.f == nil {
		if err := t.open(); err != nil {
			return err
		}
	}
	now, err := os.Stat(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Rotated and not created again yet: finish the old file.
		return t.drain(feed)
	case err != nil:
		return err
	case !os.SameFile(now, t.info):
		if err := t.drain(feed); err != nil {
			return err
		}
		t.close()
		t.log("rotated: reading the new file from its start")
		if err := t.open(); err != nil {
			return err
		}
	case now.Size() < t.off:
		t.log("truncated: reading from its start")
		t.off = 0
	}
	return t.drain(feed)
}

func (t *tail) open() error {
	f, err := os.Open(t.path)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	t.f, t.info, t.off = f, info, 0
	return nil
}

// drain feeds the open file from the last offset to its end.
func (t *tail) drain(feed func([]byte)) error {
	if t.buf == nil {
		t.buf = make([]byte, 1<<20)
	}
	for {
		n, err := t.f.ReadAt(t.buf, t.off)
		if n > 0 {
			t.off += int64(n)
			feed(t.buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading at byte %d: %w", t.off, err)
		}
	}
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}
