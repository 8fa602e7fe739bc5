package inputs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Kind is what a file holds, judged by its first bytes.
type Kind uint8

const (
	// Other is anything vramscope has no reader for (logs, CSVs, images).
	Other Kind = iota
	// Snapshot is a pickle, or a gzip or zstd stream of one.
	Snapshot
)

func (k Kind) String() string {
	if k == Snapshot {
		return "snapshot"
	}
	return "other"
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// pickleProto is the PROTO opcode that starts every pickle of protocol 2 or
// later; torch writes protocol 2 (C++) or 4-5 (Python). Protocol 0 and 1
// pickles have no header and are not recognized here: they occur only as
// hand re-dumps, and the user can still name such a file explicitly.
const pickleProto = 0x80

// isPickleHeader reports whether b starts with PROTO and a protocol number
// the format has used (2 to 5).
func isPickleHeader(b []byte) bool {
	return len(b) >= 2 && b[0] == pickleProto && b[1] >= 2 && b[1] <= 5
}

// KindOf classifies the stream r from its first bytes. A compressed stream
// counts as a snapshot only if it decompresses to a pickle header, so
// memory.csv.gz stays Other.
func KindOf(r io.Reader) (Kind, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(4)
	if err != nil && err != io.EOF {
		return Other, err
	}
	var inner io.Reader
	switch {
	case isPickleHeader(head):
		return Snapshot, nil
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Other, nil // gzip magic but not a gzip header
		}
		defer zr.Close()
		inner = zr
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return Other, fmt.Errorf("opening zstd stream: %w", err)
		}
		defer zr.Close()
		inner = zr
	default:
		return Other, nil
	}
	var b [2]byte
	if _, err := io.ReadFull(inner, b[:]); err != nil {
		return Other, nil // corrupt or empty compressed stream
	}
	if isPickleHeader(b[:]) {
		return Snapshot, nil
	}
	return Other, nil
}

// KindOfFile is KindOf for the file at path.
func KindOfFile(path string) (Kind, error) {
	f, err := os.Open(path)
	if err != nil {
		return Other, err
	}
	defer f.Close()
	return KindOf(f)
}
