package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/vramscope/vramscope/internal/pickle"
)

// Read decodes a snapshot from r, which may hold a raw pickle or a gzip or
// zstd stream of one (detected by magic bytes, not by name). Reading and
// decompression run a few MiB ahead of decoding, in another goroutine.
func Read(r io.Reader) (*Snapshot, error) { return readStream(r, -1) }

// readStream is Read of a stream of size bytes (-1: not known), which
// bounds its zstd window (MaxWindow).
func readStream(r io.Reader, size int64) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(zstd.HeaderMaxSize)
	if !Compressed(head) {
		return decodeAhead(br)
	}
	zr, format, err := Decompress(br, head, MaxWindow(size))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return decodeCompressed(format, zr)
}

// Decompress returns the content of the gzip or zstd stream r, which
// starts with head (at least zstd.HeaderMaxSize bytes of it, where it has
// them), and the format's name. A zstd frame whose window passes
// maxWindow bytes is an error (MaxWindow).
func Decompress(r io.Reader, head []byte, maxWindow int64) (io.ReadCloser, string, error) {
	if bytes.HasPrefix(head, gzipMagic) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, "", fmt.Errorf("opening gzip stream: %w", err)
		}
		return zr, "gzip", nil
	}
	if w := ZstdWindow(head); w > maxWindow {
		return nil, "", fmt.Errorf("a zstd stream whose window, %d MiB, is wider than the %d MiB read of a stream this size (compress it with a smaller --long)", w>>20, maxWindow>>20)
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(uint64(maxWindow)))
	if err != nil {
		return nil, "", fmt.Errorf("opening zstd stream: %w", err)
	}
	return zr.IOReadCloser(), "zstd", nil
}

// MaxWindow is the widest zstd window read from a stream of size bytes
// (-1: not known). The decoder reserves a frame's whole window as the
// frame starts, and Go zeroes a reservation that reuses freed memory: a
// 15 kB file that claimed a 512 MiB window took 0.6 s and 557 MB, and one
// that claimed 2 GiB 5.0 s and 2.2 GB where that was read, each window
// reserved once to sniff the file and once to decode it. So a window is
// bounded by what the file could fill: 256 bytes of it per byte of the
// file (snapshots compress 13-18x with zstd, and a frame of one segment
// has its content for its window), at least 128 MiB (`zstd --long`'s) and
// at most 2 GiB (`--long=31`, the most the zstd tool writes).
// klauspost/compress stops at 512 MiB, where `zstd --long=31` of a 603 MB
// bench file (a frame of one segment) read as no snapshot at all; that
// stays the bound of a stream of unknown size.
func MaxWindow(size int64) int64 {
	if size < 0 {
		return 512 << 20
	}
	return min(2<<30, max(128<<20, 256*size))
}

// decodeCompressed decodes the pickle that the format stream zr holds. An
// error says what the stream holds: content that is not a pickle, or a
// pickle that broke at an offset of the decompressed bytes. The decoder's
// memory budget grows with the bytes decompressed, not with the
// compressed size, and not with what the content claims.
func decodeCompressed(format string, zr io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(zr, 1<<16)
	peek, _ := br.Peek(tarHead)
	head := append([]byte(nil), peek...)
	sn, err := decodeAhead(br)
	var pe *pickle.Error
	switch {
	case err == nil:
		return sn, nil
	case errors.As(err, &pe) && pe.Offset == 0 && IsTar(head):
		return nil, fmt.Errorf("a %s stream of a tar archive, which vramscope does not read: extract it (tar xf) and analyze the folder", format)
	case errors.As(err, &pe) && pe.Offset == 0 && !pickleStart(head):
		return nil, fmt.Errorf("a %s stream whose content is not a pickle (it starts with %q): %w", format, head[:min(len(head), 16)], err)
	}
	return nil, fmt.Errorf("in the content of a %s stream (offsets count decompressed bytes): %w", format, err)
}

// IsTar reports whether b, a stream's first tarHead bytes, starts a tar
// archive: POSIX and GNU tar write "ustar" at offset 257 of its first
// header.
func IsTar(b []byte) bool { return len(b) >= tarHead && string(b[257:262]) == "ustar" }

// tarHead is how much of a stream IsTar needs.
const tarHead = 262

// pickleStart reports whether b can start a pickle: with PROTO (protocols
// 2-5) or, without a header, with an opcode that protocols 0 and 1 begin
// a dict or list with.
func pickleStart(b []byte) bool {
	if len(b) >= 2 && b[0] == 0x80 {
		return b[1] <= 5
	}
	return len(b) > 0 && bytes.IndexByte([]byte("(]}dl"), b[0]) >= 0
}

var gzipMagic, zstdMagic = []byte{0x1f, 0x8b}, []byte{0x28, 0xb5, 0x2f, 0xfd}

// Compressed reports whether a stream starting with magic is gzip or zstd.
func Compressed(magic []byte) bool { return bytes.HasPrefix(magic, gzipMagic) || isZstd(magic) }

// isZstd reports whether a stream starting with magic is zstd: a frame, or
// a skippable frame (magic 0x184D2A50 to 0x184D2A5F), which pzstd writes
// before each of its frames and the zstd tool skips.
func isZstd(magic []byte) bool {
	return bytes.HasPrefix(magic, zstdMagic) ||
		len(magic) >= 4 && magic[0]&0xf0 == 0x50 && magic[1] == 0x2a && magic[2] == 0x4d && magic[3] == 0x18
}

func decodeAhead(r io.Reader) (*Snapshot, error) {
	ra := newReadAhead(r)
	defer ra.Close()
	return Decode(ra)
}
