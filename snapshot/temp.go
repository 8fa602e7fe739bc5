package snapshot

import (
	"bytes"
	"io"
	"math"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/vramscope/vramscope/internal/tempfile"
)

// A compressed stream cannot be cut into parts, so it is decoded on one
// goroutine, at the decoder's 0.3-0.4 GB/s, while the decompressors run at
// 1.0 GB/s (gzip) and 2.7 GB/s (zstd) (klauspost/compress on the 996 MB
// bench file, 2-core dev VM). On enough cores it pays to decompress a big
// file into a temporary file first and decode that in parts, as a raw file
// is: the temporary file lives in the page cache and on disk, not in the
// process's memory, and the decoders let its pages go as they pass them.

// readDecompressed decodes the compressed file f of size bytes, which
// starts with head (streamHead), by way of a temporary file of its content in
// os.TempDir ($TMPDIR), on cores goroutines, where that pays (tempPays)
// and the directory has room (tempfile.Room). ok is false where it does not, or
// where anything failed: the caller then decodes the stream, which reports
// any error in the content as a stream's error. progress, if not nil, is
// told half the compressed bytes read while they are decompressed, then
// the other half in step with the decoders.
func readDecompressed(f *os.File, size int64, head []byte, cores int, progress func(off int64)) (sn *Snapshot, ok bool) {
	window := ZstdWindow(head)
	// Neither the most cores can use (the largest content) nor the window
	// (against the smallest content that splits) may pay: no estimate
	// needed.
	if !tempPays(head, math.MaxInt64, 0, cores) && !tempPays(head, splitMin, window, cores) {
		return nil, false
	}
	est := RawSize(f, size)
	dir := os.TempDir()
	if !tempPays(head, est, window, cores) || est > tempfile.Room(dir) {
		return nil, false
	}
	var half func(off int64)
	if progress != nil {
		half = func(off int64) { progress(off / 2) }
	}
	tf, raw, ok := decompressTemp(f, size, head, est, dir, half)
	if !ok {
		return nil, false
	}
	defer tf.Close()
	// The decompressor's window is garbage now. Let go before the decode,
	// it does not lie beside the decode's heap: analyze of a 288 MB file
	// as `zstd --long=27` (a 128 MiB window) peaked at 174 MB without this
	// and at 158 MB with it, while it decompresses (2-core dev VM).
	debug.FreeOSMemory()
	var decoded func(off int64)
	if progress != nil {
		decoded = func(off int64) { progress(size/2 + int64(float64(size-size/2)*float64(off)/float64(raw))) }
	}
	sn, err := readFile(tf, raw, cores, decoded, false)
	return sn, err == nil
}

// tempPays reports whether a compressed file (magic says gzip or zstd)
// of est raw bytes, whose decompressor keeps window bytes of it (zstd's
// window), decodes sooner or in less memory by way of a temporary file on
// cores cores. It takes the decompression, then the decode in parts: on
// the 16-core GPU host, analyze of the 996 MB bench file took 2.1-2.3 s
// that way against 5.2-5.8 s as a zstd stream, 2.8-3.0 s against 3.6-4.0 s
// gzipped; on 4 cores 3.4-3.9 s against 5.4-5.6 s for zstd, but as long
// for gzip (3.9-4.4 s against 3.7-4.3 s), whose decompression is the
// slower: it goes by way of a file from 8 parts on, zstd from 4, or with
// a wide window (wideShare) on any number of cores.
func tempPays(magic []byte, est, window int64, cores int) bool {
	parts := 4
	if bytes.HasPrefix(magic, gzipMagic) {
		parts = 8
	}
	return Compressed(magic) && est >= splitMin && (decodeParts(est, cores) >= parts || wide(window, est))
}

// wideShare: a zstd window over 1/wideShare of the content is wide. A
// stream's decoder holds its window beside what the decode builds, about
// a third of the content: analyze of bench files compressed with `zstd
// --long=27` (a 128 MiB window) as streams peaked at 0.87x the content
// (288 MB), 0.58x (603 MB) and 0.49x (996 MB), on 2 cores of the dev VM.
// By way of a temporary file the window is let go before the decode
// starts: 0.55x (the window alone, as it decompresses), 0.48x and 0.49x,
// and there is no window beside the output where that is written through
// a mapping (decompressMapped): 0.49-0.50x for the 288 MB file.
// That costs the file's writing (there 2.75-3.6 s became 3.6-4.6 s for
// the 603 MB file, and 4.7-5.0 s would have been 7.8-9.5 s for the 996 MB
// one), so narrower windows stay streams.
const wideShare = 6

// wide reports whether a zstd window of window bytes is wide for a content
// of est bytes (wideShare).
func wide(window, est int64) bool { return window > est/wideShare }

// decompressTemp decompresses the compressed file f of size bytes, which
// starts with head (streamHead) and whose content is estimated at est
// bytes, into a new temporary file in dir, and
// returns the file, open, and the content's size. The file is unlinked at
// once: it lasts while it is open, and nothing is left behind if the
// process dies. ok is false, and nothing is left open, if the stream is
// damaged, if the file cannot be written, or if the content passes twice
// est (a gzip file of several members, whose trailer gives the last one's
// size): a content far larger than estimated does not fill the disk.
// progress, if not nil, is told how many bytes of f were read.
func decompressTemp(f *os.File, size int64, head []byte, est int64, dir string, progress func(off int64)) (tf *os.File, raw int64, ok bool) {
	file, err := tempfile.Create(dir, "vramscope-*.pickle")
	if err != nil {
		return nil, 0, false
	}
	defer func() {
		if !ok {
			file.Close()
		}
	}()
	if wide(ZstdWindow(head), est) {
		// Here the window is what memory the decompression takes. A
		// narrower one goes faster as a stream: on 4 goroutines of the
		// 2-core dev VM, analyze of the 996 MB bench file as `zstd -3`
		// took 3.40-3.72 s mapped against 3.39-3.59 s, with 1 s more of
		// system time.
		if raw, mapped, ok := decompressMapped(f, size, file, est, progress); mapped {
			return file, raw, ok
		}
	}
	var in io.ReaderAt = f
	if progress != nil {
		in = progressReaderAt{f, progress, new(atomic.Int64)}
	}
	zr, _, err := Decompress(io.NewSectionReader(in, 0, size), head, MaxWindow(size))
	if err != nil {
		return nil, 0, false
	}
	defer zr.Close()
	// The decompressor runs on a goroutine of its own, ahead of the
	// writes.
	ra := newReadAhead(io.LimitReader(zr, 2*est+1))
	defer ra.Close()
	raw, err = ra.WriteTo(file)
	if err != nil || raw == 0 || raw > 2*est {
		return nil, 0, false
	}
	return file, raw, true
}

// decompressMapped decompresses the zstd file f of size bytes into the
// empty file out, through mappings of both: the decoder's history is the
// output itself (zstd's DecodeAll), so no window lies in the process's
// memory beside it, however wide the stream's. A stream decoder keeps its
// window, 128 MiB for `zstd --long`, which is 0.47 of a 288 MB bench
// file: analyze of that file so compressed peaked at 0.55x it by way of a
// temporary file written from the stream (2-core dev VM). The output's
// pages are let go behind the writer as it goes (mapping.written), and
// the decoder maps again those its matches read. mapped is false, with
// nothing written, where the files cannot be mapped: the caller then
// writes the stream. ok is false where the stream is damaged, or its
// content passes twice est, its estimated size (the file is mapped that
// long, and sparse past the content).
func decompressMapped(f *os.File, size int64, out *os.File, est int64, progress func(off int64)) (raw int64, mapped, ok bool) {
	limit := 2 * est
	in, err := mapFile(f, size)
	if err != nil {
		return 0, false, false
	}
	defer in.close()
	m, err := mapOutput(out, limit)
	if err != nil {
		_ = out.Truncate(0) // the stream is written from the start
		return 0, false, false
	}
	defer m.close()
	// The output is bounded by the mapping (the cap limit), not by a
	// memory limit, which would bound the window too: a pzstd frame's
	// window may pass its content.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(uint64(MaxWindow(size))), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return 0, true, false
	}
	defer dec.Close()

	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		trimBehind(m, in, est, stop, progress)
	}()
	b, err := decodeInto(dec, in.b, m.b)
	close(stop)
	<-stopped // before the mappings go: it releases pages of theirs
	// With the cap limit DecodeAll never moves b off the mapping; a b
	// elsewhere would leave the file without the content.
	if err != nil || len(b) == 0 || &b[:1][0] != &m.b[0] {
		return 0, true, false
	}
	raw = int64(len(b))
	if progress != nil {
		progress(size)
	}
	m.release(0, raw)
	if out.Truncate(raw) != nil {
		return 0, true, false
	}
	return raw, true, true
}

// decodeInto decompresses in, all of a zstd stream, into out from its
// start, and returns what it wrote (a prefix of out, or a copy where out
// was too short without dec's cap limit). A memory fault there, the input
// cut short while it is read or no room left on the disk under the
// output, is an error, not a crash.
func decodeInto(dec *zstd.Decoder, in, out []byte) (b []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	return dec.DecodeAll(in, out[:0:len(out)])
}

// trimBehind lets go the pages of the output mapping out that a writer
// filling it from the start has passed, and those of the input mapping in
// in proportion to est, the content's estimated size, every trimEvery
// until stop closes, telling progress (if not nil) how much of the input
// that makes. Both stay in the page cache: a match that reads back maps
// its page again.
func trimBehind(out, in *mapping, est int64, stop <-chan struct{}, progress func(off int64)) {
	size := int64(len(in.b))
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	vec := make([]byte, trimAhead/int64(os.Getpagesize()))
	at := int64(0)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		at = out.written(at, vec)
		out.release(0, at-trimKeep)
		read := min(size, int64(float64(size)*float64(at)/float64(est)))
		in.release(0, read-trimKeep)
		if progress != nil {
			progress(read)
		}
	}
}

// trimEvery, trimKeep and trimAhead pace trimBehind: zstd decompresses at
// 1-3 GB/s, so a tick passes some 20-60 MB of output, and the last
// trimKeep bytes before the writer stay mapped. With ticks of 50 ms the
// decompression of decompressMapped's 288 MB file peaked at 107-112
// thousand KiB, and of 100 ms at 156-158, against 77-79, in the same time.
const (
	trimEvery = 20 * time.Millisecond
	trimKeep  = 8 << 20
	trimAhead = 1 << 30 // the most a tick looks ahead of the last
)
