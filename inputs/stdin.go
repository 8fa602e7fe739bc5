package inputs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/vramscope/vramscope/internal/tempfile"
)

// Standard input is read through a file where it can be: a snapshot in a
// file of known size is decoded in parts, on every core, under a memory
// limit set from that size, where a stream is decoded on one core with no
// limit. A redirect (vramscope analyze - < F) is that file already; a pipe
// is first copied into a temporary file. On the 16-core GPU host `cat F |
// vramscope analyze -` of the 996 MB bench file took 4.3-5.6 s as a stream
// and 1.8-1.9 s copied first, at 0.47x the file instead of 0.51x; of a
// 1 GB Llama trace on 2 cores, 5.3-5.5 s against 4.2-4.4 (bench/RESULTS.md).
// With one core no part would run beside another: the pipe is a stream.
//
// The copy goes only where tempfile.Room allows. A pipe that holds more is
// read as a stream from where the copy stopped: the bytes copied, read
// back from the file, then the rest of the pipe. Nothing read is lost.

// stdinSource is standard input as Open reads it: a file of size bytes,
// or stream.
type stdinSource struct {
	file   *os.File
	size   int64
	stream io.Reader
	err    error
}

// stdin is os.Stdin as read: of is the *os.File it was then (tests set
// os.Stdin to files and pipes of their own).
var stdin struct {
	mu  sync.Mutex
	of  *os.File
	src stdinSource
}

// SpoolStdin reads standard input ahead, as Open of Stdin first does,
// telling progress (if not nil) how many bytes of a pipe it has copied.
// Only the first call reads; later ones return at once, unless os.Stdin
// was set to another file meanwhile.
func SpoolStdin(progress func(copied int64)) {
	stdin.mu.Lock()
	defer stdin.mu.Unlock()
	if stdin.of != os.Stdin {
		stdin.of = os.Stdin
		dir := os.TempDir()
		stdin.src = openStdin(os.Stdin, runtime.GOMAXPROCS(0), dir, tempfile.Room(dir), progress)
	}
}

// openStdin is how Open reads f, standard input, on cores cores, copying
// a pipe into a temporary file in dir, up to room bytes.
func openStdin(f *os.File, cores int, dir string, room int64, progress func(int64)) stdinSource {
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		// A redirect: read in place, unless something read some of it
		// before (then the rest is copied, as a pipe's).
		if off, err := f.Seek(0, io.SeekCurrent); err == nil && off == 0 {
			return stdinSource{file: f, size: st.Size()}
		}
	}
	if cores < 2 {
		return stdinSource{stream: f, size: -1}
	}
	return spool(f, dir, room, progress)
}

// spoolChunk is how much of a pipe spool reads at a time.
const spoolChunk = 1 << 20

// spool copies r into a new temporary file in dir, up to room bytes. Past
// room, or if the file cannot be made or written, it returns a stream of
// the bytes copied, then of the rest of r. A read error is the source's
// error.
func spool(r io.Reader, dir string, room int64, progress func(int64)) stdinSource {
	if room <= 0 {
		return stdinSource{stream: r, size: -1}
	}
	f, err := tempfile.Create(dir, "vramscope-stdin-*.pickle")
	if err != nil {
		return stdinSource{stream: r, size: -1}
	}
	// rest is the stream from the bytes copied on, where pending (read
	// from r, not in the file) are next.
	rest := func(copied int64, pending []byte) stdinSource {
		return stdinSource{stream: io.MultiReader(io.NewSectionReader(f, 0, copied), bytes.NewReader(pending), r), size: -1}
	}
	buf := make([]byte, spoolChunk)
	var copied int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if copied+int64(n) > room {
				return rest(copied, bytes.Clone(buf[:n]))
			}
			w, werr := f.Write(buf[:n])
			copied += int64(w)
			if werr != nil {
				return rest(copied, bytes.Clone(buf[w:n]))
			}
			if progress != nil {
				progress(copied)
			}
		}
		switch {
		case rerr == io.EOF:
			return stdinSource{file: f, size: copied}
		case rerr != nil:
			f.Close()
			return stdinSource{err: fmt.Errorf("reading standard input (after %d bytes): %w", copied, rerr)}
		}
	}
}

// reader is a Reader of s from its start.
func (s *stdinSource) reader() (*Reader, error) {
	switch {
	case s.err != nil:
		return nil, s.err
	case s.file != nil:
		return &Reader{r: io.NewSectionReader(s.file, 0, s.size), file: s.file, size: s.size}, nil
	}
	return &Reader{r: s.stream, size: -1}, nil
}
