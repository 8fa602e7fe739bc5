package snapshot

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Read decodes a snapshot from r, which may hold a raw pickle or a gzip or
// zstd stream of one (detected by magic bytes, not by name). Reading and
// decompression run a few MiB ahead of decoding, in another goroutine.
func Read(r io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("opening gzip stream: %w", err)
		}
		defer zr.Close()
		return decodeAhead(zr)
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("opening zstd stream: %w", err)
		}
		defer zr.Close()
		return decodeAhead(zr)
	}
	return decodeAhead(br)
}

var gzipMagic, zstdMagic = []byte{0x1f, 0x8b}, []byte{0x28, 0xb5, 0x2f, 0xfd}

// compressed reports whether a stream starting with magic is gzip or zstd.
func compressed(magic []byte) bool {
	return bytes.HasPrefix(magic, gzipMagic) || bytes.HasPrefix(magic, zstdMagic)
}

func decodeAhead(r io.Reader) (*Snapshot, error) {
	ra := newReadAhead(r)
	defer ra.Close()
	return Decode(ra)
}
