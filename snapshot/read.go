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
func Read(r io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	if !Compressed(magic) {
		return decodeAhead(br)
	}
	zr, format, err := decompressor(br, magic)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return decodeCompressed(format, zr)
}

// decompressor returns the content of the gzip or zstd stream r, which
// starts with magic, and the format's name.
func decompressor(r io.Reader, magic []byte) (io.ReadCloser, string, error) {
	if bytes.HasPrefix(magic, gzipMagic) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, "", fmt.Errorf("opening gzip stream: %w", err)
		}
		return zr, "gzip", nil
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, "", fmt.Errorf("opening zstd stream: %w", err)
	}
	return zr.IOReadCloser(), "zstd", nil
}

// decodeCompressed decodes the pickle that the format stream zr holds. An
// error says what the stream holds: content that is not a pickle, or a
// pickle that broke at an offset of the decompressed bytes. The decoder's
// memory budget grows with the bytes decompressed, not with the
// compressed size, and not with what the content claims.
func decodeCompressed(format string, zr io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(zr, 1<<16)
	peek, _ := br.Peek(16)
	head := append([]byte(nil), peek...)
	sn, err := decodeAhead(br)
	var pe *pickle.Error
	switch {
	case err == nil:
		return sn, nil
	case errors.As(err, &pe) && pe.Offset == 0 && !pickleStart(head):
		return nil, fmt.Errorf("a %s stream whose content is not a pickle (it starts with %q): %w", format, head, err)
	}
	return nil, fmt.Errorf("in the content of a %s stream (offsets count decompressed bytes): %w", format, err)
}

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
func Compressed(magic []byte) bool {
	return bytes.HasPrefix(magic, gzipMagic) || bytes.HasPrefix(magic, zstdMagic)
}

func decodeAhead(r io.Reader) (*Snapshot, error) {
	ra := newReadAhead(r)
	defer ra.Close()
	return Decode(ra)
}
