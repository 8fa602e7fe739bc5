package snapshot

import (
	"bytes"
	"encoding/binary"
	"io"

	"github.com/klauspost/compress/zstd"
)

// RawSize is the size of the pickle held in the first size bytes of r: r's
// own size for a raw pickle; a gzip stream's from its trailer, which holds
// it modulo 4 GiB (the last member's only), with as many 4 GiB as a sample
// says for a file big enough to have wrapped; a zstd stream's from its
// first frame's header where the compressor wrote it (the zstd tool does,
// for a file), else as its first sampleBytes decompress (sampledSize).
// The memory limit that analyze sets while a snapshot loads follows it,
// and one set too low makes the collector run without end: analyze of the
// 996 MB bench file as zstd (55 MB, 18x) ran 1,183 collections with the
// 10x this took before (gzip: 4), in 6.6-6.9 s instead of about 5 (2-core
// dev VM).
func RawSize(r io.ReaderAt, size int64) int64 {
	head := streamHead(r)
	switch {
	case !Compressed(head):
		return size
	case bytes.HasPrefix(head, gzipMagic) && size >= 18:
		var trailer [4]byte
		if _, err := r.ReadAt(trailer[:], size-4); err == nil {
			near := size
			if size >= wrapMin {
				near = max(near, sampledSize(r, size, head))
			}
			return unwrap(int64(binary.LittleEndian.Uint32(trailer[:])), size, near)
		}
	case isZstd(head):
		if h, ok := zstdHeader(head); ok && h.HasFCS && h.FrameContentSize > 0 {
			return int64(min(h.FrameContentSize, 1<<62))
		}
		if n := sampledSize(r, size, head); n > 0 {
			return n
		}
	}
	return 10 * size
}

// streamHead is the first bytes of the stream r holds, as many as a zstd
// frame's header may take (zstd.HeaderMaxSize) or all there are: enough to
// tell raw from gzip and zstd, and a zstd frame's window and size.
func streamHead(r io.ReaderAt) []byte {
	head := make([]byte, zstd.HeaderMaxSize)
	n, _ := r.ReadAt(head, 0)
	return head[:n]
}

// zstdHeader is the header of the zstd frame that head, a stream's first
// bytes, starts with.
func zstdHeader(head []byte) (zstd.Header, bool) {
	var h zstd.Header
	return h, bytes.HasPrefix(head, zstdMagic) && h.Decode(head) == nil
}

// ZstdWindow is how much of the content a decoder of the zstd stream
// that starts with head (zstd.HeaderMaxSize bytes, or all there are)
// keeps while it decompresses: its first frame's window, or the frame's
// content where the frame is one segment; 0 for any other stream.
func ZstdWindow(head []byte) int64 {
	h, ok := zstdHeader(head)
	switch {
	case !ok:
		return 0
	case h.SingleSegment:
		return int64(min(h.FrameContentSize, 1<<62))
	}
	return int64(min(h.WindowSize, 1<<62))
}

// wrapMin is the smallest gzip file whose content can pass 4 GiB at the
// 64x that sampledSize allows: below it the trailer's size is the content's.
const wrapMin = 64 << 20

// unwrap is the content size that a gzip trailer's isize (the size
// modulo 4 GiB) stands for in a file of size bytes: isize plus the
// multiple of 4 GiB nearest near, and no less than the file.
func unwrap(isize, size, near int64) int64 {
	k := max(0, (near-isize+1<<31)>>32, (size-isize+1<<32-1)>>32)
	return isize + k<<32
}

// sampleBytes is how much of a stream sampledSize decompresses: about 25
// ms of work for zstd, 50 for gzip, enough to pass the segments that a
// snapshot starts with.
const sampleBytes = 4 << 20

// sampledSize estimates the content of the compressed stream (gzip or
// zstd, as magic says) in the first size bytes of r from how much its
// first sampleBytes decompress to (at most 64 times as much); 0 if they
// cannot be decompressed.
func sampledSize(r io.ReaderAt, size int64, head []byte) int64 {
	in := min(size, sampleBytes)
	zr, _, err := Decompress(io.NewSectionReader(r, 0, in), head, MaxWindow(size))
	if err != nil {
		return 0
	}
	defer zr.Close()
	out, _ := io.Copy(io.Discard, io.LimitReader(zr, 64*in))
	if out == 0 {
		return 0
	}
	return int64(float64(size) * float64(out) / float64(in))
}
