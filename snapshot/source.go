package snapshot

import (
	"bytes"
	"io"
	"sync/atomic"

	"github.com/vramscope/vramscope/internal/pickle"
)

// A source gives decoders of one raw pickle: the goroutines of a split
// decode (split.go) read it at once.
type source interface {
	size() int64
	// decoder returns the head's decoder, from the start.
	decoder(sink pickle.Sink) *pickle.Decoder
	// spliced says that the head skips n bytes a tail decoded.
	spliced(n int64)
	// stretch returns the walker of the stretch from from to to (pickle's
	// Stretch).
	stretch(sink pickle.Sink, proto int, from, to int64) *pickle.Decoder
	// fork returns the decoder of the tail that starts at off, where n
	// entries were memoized: w's, a walker's, then those read gives
	// (pickle's Fork).
	fork(w *pickle.Decoder, sink pickle.Sink, off int64, n uint64, read func(uint64) (pickle.Value, bool)) (*pickle.Decoder, error)
	// readerAt reads the stream at offsets, for the search for frames
	// near the cuts (pickle.FramesNear).
	readerAt() io.ReaderAt
	// from is the stream from off on, for Splice: nil for decoders over
	// bytes, which go on in their own.
	from(off int64) io.Reader
}

// atSource reads the first n bytes of r at offsets.
type atSource struct {
	r io.ReaderAt
	n int64
}

func (s atSource) size() int64 { return s.n }

func (s atSource) decoder(sink pickle.Sink) *pickle.Decoder {
	return pickle.NewDecoder(io.NewSectionReader(s.r, 0, s.n), sink, pickle.DefaultLimits)
}

// spliced needs nothing: progress counts what is read (progressReaderAt).
func (atSource) spliced(int64) {}

func (s atSource) stretch(sink pickle.Sink, proto int, from, to int64) *pickle.Decoder {
	d := pickle.NewDecoder(io.NewSectionReader(quiet(s.r), from, to-from), sink, pickle.DefaultLimits)
	d.Stretch(from, proto)
	return d
}

func (s atSource) fork(w *pickle.Decoder, sink pickle.Sink, off int64, n uint64, read func(uint64) (pickle.Value, bool)) (*pickle.Decoder, error) {
	t := pickle.NewDecoder(s.from(off), sink, pickle.DefaultLimits)
	return t, w.Fork(t, off, n, read)
}

func (s atSource) readerAt() io.ReaderAt { return quiet(s.r) }

func (s atSource) from(off int64) io.Reader { return io.NewSectionReader(s.r, off, s.n-off) }

// bytesSource decodes b in place; release, if not nil, is told of each
// range of b that a decoder has passed, in whole releaseSteps (it may drop
// a mapping's pages),
// and progress, if not nil, of how many bytes the decoders have passed in
// all (tally counts them).
type bytesSource struct {
	b        []byte
	release  func(from, to int64)
	progress func(n int64)
	tally    *passage
	// file, if not nil, reads b's bytes at offsets (b mapping a file: the
	// file), for what reads b once and ahead of the decoders: the search
	// for frames near the cuts (pickle.FramesNear; when it hopped over
	// every frame's header, a read of 9 bytes cost less than mapping the
	// 16 pages around them: on the 996 MB bench file 58 ms for its 15,000
	// frames against 366 ms through a fresh mapping) and the walkers, which
	// copying costs less than mapping pages that the decoders map again
	// (16-core GPU host: 7.4-7.7 s of CPU time for the decode instead of
	// 8.5-8.7, the walkers done 0.02-0.05 s sooner).
	file io.ReaderAt
}

func (s bytesSource) size() int64 { return int64(len(s.b)) }

// passage is what the decoders of a bytesSource have passed, for progress:
// decoded in all, and skipped by the head where tails decoded.
type passage struct{ decoded, skipped atomic.Int64 }

func (s bytesSource) decoder(sink pickle.Sink) *pickle.Decoder {
	return pickle.NewDecoderBytes(s.b, sink, pickle.DefaultLimits, s.moved(0, true))
}

func (s bytesSource) spliced(n int64) {
	if s.tally != nil {
		s.tally.skipped.Add(n)
	}
}

// stretch walks b[from:to], read from the file if there is one. A walker
// lets the pages it passed go as a decoder does (the head or a tail reads
// them again later, from the page cache), but tells progress nothing: it
// runs ahead of the decoding.
func (s bytesSource) stretch(sink pickle.Sink, proto int, from, to int64) *pickle.Decoder {
	if s.file != nil {
		return atSource{s.file, s.size()}.stretch(sink, proto, from, to)
	}
	q := s
	q.progress = nil
	d := pickle.NewDecoderBytes(s.b[:to], sink, pickle.DefaultLimits, q.moved(from, false))
	d.Stretch(from, proto)
	return d
}

func (s bytesSource) fork(w *pickle.Decoder, sink pickle.Sink, off int64, n uint64, read func(uint64) (pickle.Value, bool)) (*pickle.Decoder, error) {
	t := pickle.NewDecoderBytes(s.b, sink, pickle.DefaultLimits, s.moved(off, false))
	return t, w.Fork(t, off, n, read)
}

func (s bytesSource) readerAt() io.ReaderAt {
	if s.file != nil {
		return s.file
	}
	return bytes.NewReader(s.b)
}

// moved is what a decoder from offset from on (the head, if head) tells
// of each window it moves to: progress learns what the decoders have
// passed in all, less what the head skipped, and release gets the whole
// steps from the first after from to it.
func (s bytesSource) moved(from int64, head bool) func(base int64) {
	done := (from + releaseStep - 1) &^ (releaseStep - 1)
	passed, skipped := from, int64(0)
	return func(base int64) {
		if s.progress != nil {
			n := base - passed
			if head {
				k := s.tally.skipped.Load()
				n, skipped = n-(k-skipped), k
			}
			s.progress(s.tally.decoded.Add(n))
			passed = base
		}
		if to := base &^ (releaseStep - 1); s.release != nil && to > done {
			s.release(done, to)
			done = to
		}
	}
}

func (s bytesSource) from(int64) io.Reader { return nil }

// A decoder over a mapping lets the pages behind it go in whole aligned
// releaseSteps: the page cache maps a file in folios of up to 2 MiB, and
// releasing ranges that start or end inside one left it mapped (measured
// on the 996 MB bench file: 77 MB of the file stayed resident with 8 MiB
// ranges that were not aligned, 165 MB with 2 MiB ones; 18 MB with aligned
// 2 MiB ones).
const releaseStep = 2 << 20
