package pools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// chunkSize is how much of a log one worker parses at a time: large
// enough that handing chunks around costs nothing next to parsing them,
// small enough that the chunks in flight stay a few tens of megabytes.
const chunkSize = 4 << 20

// maxLine bounds one line: records pasted without newlines run long.
const maxLine = 16 << 20

// maxSplitTries is how many line ends back from a chunk's end a split is
// looked for before the chunk is cut at its last line end regardless.
const maxSplitTries = 64

// eachChunk reads r in chunks of whole lines (about size bytes each), parses them on every core
// and hands the parts to add in the order of the log. A chunk ends before
// a line that starts a record of its own, so that no record a paste
// wrapped over several lines is cut in two.
func eachChunk(r io.Reader, size int, parse func([]byte) part, add func(part)) error {
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan job)
	// order holds each chunk's result in the order of the log; its
	// buffer bounds the chunks in flight.
	order := make(chan chan part, 2*workers)
	for range workers {
		go func() {
			for j := range jobs {
				j.out <- parse(j.data)
				// A part keeps nothing of its chunk's bytes.
				chunks.Put(j.buf)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for out := range order {
			add(<-out)
		}
		close(done)
	}()
	err := split(r, size, func(buf *[]byte, data []byte) {
		out := make(chan part, 1)
		order <- out
		jobs <- job{buf, data, out}
	})
	close(jobs)
	close(order)
	<-done
	return err
}

type job struct {
	buf  *[]byte // data's buffer, for chunks to reuse
	data []byte
	out  chan part
}

// chunks holds buffers split has handed out and the parse is done with:
// a day of logs would otherwise allocate, and clear, its size anew.
var chunks sync.Pool

// split reads r and calls emit with consecutive chunks of whole lines of
// about chunk bytes, each in a buffer of its own.
func split(r io.Reader, chunk int, emit func(buf *[]byte, data []byte)) error {
	var carry []byte
	size := chunk
	for {
		buf, _ := chunks.Get().(*[]byte)
		if need := max(size, 2*len(carry)); buf == nil || cap(*buf) < need {
			b := make([]byte, need)
			buf = &b
		}
		*buf = (*buf)[:cap(*buf)]
		copy(*buf, carry)
		n, err := io.ReadFull(r, (*buf)[len(carry):])
		data := (*buf)[:len(carry)+n]
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return err
		}
		// Only the first line can have grown past a chunk.
		if i := bytes.IndexByte(data, '\n'); i > maxLine || i < 0 && len(data) > maxLine {
			return fmt.Errorf("a line longer than %d MiB", maxLine>>20)
		}
		if eof {
			if len(data) > 0 {
				emit(buf, data)
			}
			return nil
		}
		cut := splitPoint(data)
		if cut < 0 {
			carry, size = data, 2*len(data)
			continue
		}
		carry, size = bytes.Clone(data[cut:]), chunk
		emit(buf, data[:cut])
	}
}

// splitPoint is where the next chunk starts: after a line end followed by
// a whole line that does not continue the record before it; -1 when data
// holds no such line (the line after the last line end may be cut).
func splitPoint(data []byte) int {
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		return -1
	}
	end := last // the end of the line after the candidate
	for range maxSplitTries {
		i := bytes.LastIndexByte(data[:end], '\n')
		if i < 0 {
			return -1
		}
		line, _, _ := containerPrefix(bytes.TrimRight(data[i+1:end], " \r"))
		if !continues(line) {
			return i + 1
		}
		end = i
	}
	return last + 1
}
