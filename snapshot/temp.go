package snapshot

import (
	"bytes"
	"io"
	"math"
	"os"
	"runtime/debug"
	"sync/atomic"

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
	return Compressed(magic) && est >= splitMin && (decodeParts(est, cores) >= parts || window > est/wideShare)
}

// wideShare: a zstd window over 1/wideShare of the content is wide. A
// stream's decoder holds its window beside what the decode builds, about
// a third of the content: analyze of bench files compressed with `zstd
// --long=27` (a 128 MiB window) as streams peaked at 0.87x the content
// (288 MB), 0.58x (603 MB) and 0.49x (996 MB), on 2 cores of the dev VM.
// By way of a temporary file the window is let go before the decode
// starts: 0.55x (the window alone, as it decompresses), 0.48x and 0.49x.
// That costs the file's writing (there 2.75-3.6 s became 3.6-4.6 s for
// the 603 MB file, and 4.7-5.0 s would have been 7.8-9.5 s for the 996 MB
// one), so narrower windows stay streams.
const wideShare = 6

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
