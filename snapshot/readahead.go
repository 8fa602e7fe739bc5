package snapshot

import (
	"io"
	"sync"
)

// readAhead reads r in a goroutine, a few buffers ahead of the decoder, so
// that the copies out of the page cache (and gzip/zstd decompression, when
// r decompresses) run on another core than the pickle VM. On 2 cores this
// is the cheap half of parallel decoding (shared/research/pickle-bench.md).
// Measured: a 210 MB real-derived snapshot gzipped to 16 MB decodes in
// 1.16-1.39 s instead of 1.50-1.61 s; raw files gain nothing measurable.
type readAhead struct {
	full chan chunk
	free chan []byte
	done chan struct{}
	once sync.Once
	cur  chunk
	off  int
}

type chunk struct {
	b   []byte
	err error
}

const (
	aheadBufs = 4
	aheadSize = 1 << 20
)

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{
		full: make(chan chunk, aheadBufs),
		free: make(chan []byte, aheadBufs),
		done: make(chan struct{}),
	}
	for range aheadBufs {
		ra.free <- make([]byte, aheadSize)
	}
	go ra.fill(r)
	return ra
}

func (ra *readAhead) fill(r io.Reader) {
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.done:
			return
		}
		n, err := io.ReadFull(r, b)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		select {
		case ra.full <- chunk{b: b[:n], err: err}:
		case <-ra.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for ra.off == len(ra.cur.b) {
		if ra.cur.err != nil {
			return 0, ra.cur.err
		}
		if ra.cur.b != nil {
			ra.free <- ra.cur.b[:cap(ra.cur.b)]
		}
		ra.cur, ra.off = <-ra.full, 0
	}
	n := copy(p, ra.cur.b[ra.off:])
	ra.off += n
	return n, nil
}

// WriteTo writes what is left to w, each buffer as it comes: a copy to a
// file (decompressTemp) writes while the next buffers are read.
func (ra *readAhead) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		if ra.off < len(ra.cur.b) {
			k, err := w.Write(ra.cur.b[ra.off:])
			n += int64(k)
			ra.off += k
			if err != nil {
				return n, err
			}
		}
		if ra.cur.err != nil {
			if ra.cur.err == io.EOF {
				return n, nil
			}
			return n, ra.cur.err
		}
		if ra.cur.b != nil {
			ra.free <- ra.cur.b[:cap(ra.cur.b)]
		}
		ra.cur, ra.off = <-ra.full, 0
	}
}

// Close stops the reading goroutine; Read must not be called after it.
func (ra *readAhead) Close() {
	ra.once.Do(func() { close(ra.done) })
}
