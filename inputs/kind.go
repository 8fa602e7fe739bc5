package inputs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/vramscope/vramscope/memlog"
	"github.com/vramscope/vramscope/pools"
	"github.com/vramscope/vramscope/pools/ledger"
	"github.com/vramscope/vramscope/snapshot"
)

// Kind is what a file holds, judged by its first bytes.
type Kind uint8

const (
	// Other is anything vramscope has no reader for (training logs,
	// images, checkpoints).
	Other Kind = iota
	// Snapshot is a pickle, or a gzip or zstd stream of one.
	Snapshot
	// MemoryLog is a memory-log CSV (memlog.ParseCSV).
	MemoryLog
	// Text holds torch.cuda.memory_summary() tables or CUDA OOM messages
	// (memlog.ParseMemorySummaries, memlog.ParseOOMMessages), or a serving
	// engine's pool stats (pools.Parse).
	Text
)

func (k Kind) String() string {
	switch k {
	case Snapshot:
		return "snapshot"
	case MemoryLog:
		return "memory log"
	case Text:
		return "text"
	}
	return "other"
}

// sniffWindow is the widest zstd window KindOf decompresses a stream's
// first bytes with. The decoder reserves the whole window first (see
// snapshot.MaxWindow): `zstd --long=27` writes 128 MiB, and sniffing an
// input should not cost that. Up to 8 MiB are zstd's windows at every
// level of the zstd tool but --long and --ultra.
const sniffWindow = 8 << 20

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
// memory.csv.gz stays Other; but for a zstd stream whose window is wider
// than sniffWindow, which is left to the snapshot reader to judge.
func KindOf(r io.Reader) (Kind, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(zstd.HeaderMaxSize)
	if err != nil && err != io.EOF {
		return Other, err
	}
	switch {
	case isPickleHeader(head):
		return Snapshot, nil
	case !snapshot.Compressed(head):
		return Other, nil
	}
	inner, done, err := decompressed(br)
	switch {
	case errors.Is(err, errWideWindow):
		return Snapshot, nil
	case err != nil:
		return Other, nil // the magic, but not a stream's header
	}
	defer done()
	var b [2]byte
	if _, err := io.ReadFull(inner, b[:]); err != nil {
		return Other, nil // corrupt or empty compressed stream
	}
	if isPickleHeader(b[:]) {
		return Snapshot, nil
	}
	return Other, nil
}

// errWideWindow says a zstd stream's window is wider than sniffWindow.
var errWideWindow = errors.New("a zstd window wider than the sniff's")

// decompressed is what the stream in br holds: br itself or, for a gzip or
// zstd stream, its decompression through a window of at most sniffWindow
// (errWideWindow for a wider one). done lets the decompressor go.
func decompressed(br *bufio.Reader) (r io.Reader, done func(), err error) {
	head, err := br.Peek(zstd.HeaderMaxSize)
	if err != nil && err != io.EOF {
		return nil, nil, err
	}
	switch {
	case !snapshot.Compressed(head):
		return br, func() {}, nil
	case snapshot.ZstdWindow(head) > sniffWindow:
		return nil, nil, errWideWindow
	}
	zr, _, err := snapshot.Decompress(br, head, sniffWindow)
	if err != nil {
		return nil, nil, err
	}
	return zr, func() { zr.Close() }, nil
}

// foreign are the compressions vramscope does not read, by the magic their
// streams start with, and the command that undoes each.
var foreign = []struct{ magic, name, undo string }{
	{"\xfd7zXZ\x00", "xz", "xz -d"},
	{"BZh", "bzip2", "bzip2 -d"},
	{"\x04\x22\x4d\x18", "lz4", "lz4 -d"},
	{"PK\x03\x04", "zip", "unzip"},
	{"7z\xbc\xaf\x27\x1c", "7z", "7z x"},
	{"\x89LZO\x00", "lzop", "lzop -d"},
}

// Foreign says what a stream that starts with head is where vramscope does
// not read it (xz, bzip2, lz4, zip, 7z or lzop compressed; a tar archive),
// and what to do about it; "" for any other stream.
func Foreign(head []byte) (what, do string) {
	if snapshot.IsTar(head) {
		return "a tar archive", "extract it (tar xf) and analyze the folder"
	}
	for _, f := range foreign {
		if bytes.HasPrefix(head, []byte(f.magic)) && (f.name != "bzip2" || len(head) > 3 && head[3] >= '1' && head[3] <= '9') {
			return f.name + "-compressed", "decompress it first (" + f.undo + "), or compress it with zstd or gzip"
		}
	}
	return "", ""
}

// ContentHead is the first 512 bytes of what the file at path holds,
// decompressed where it is a gzip or zstd stream (decompressed); nil if it
// cannot be read. It tells what a file that no reader took is (Foreign):
// a tar.gz of dumps is a tar archive.
func ContentHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	r, done, err := decompressed(bufio.NewReader(f))
	if err != nil {
		return nil
	}
	defer done()
	b := make([]byte, 512)
	n, _ := io.ReadFull(r, b)
	return b[:n]
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

// binarySniff is how much of a file is searched for a NUL byte before it
// is read whole for text formats: checkpoints and images in a dump folder
// can be gigabytes, and none of them is a log.
const binarySniff = 8 << 10

// HeadBytes is how much of a text file its kind is first judged from:
// enough for a serving engine's startup lines and first stats lines.
const HeadBytes = 1 << 20

// kindOfText classifies a file that is not a snapshot as MemoryLog, Text or
// Other by its content (memlog.Detect). It reads the whole file, since an
// OOM message may come last in a long log, unless its start shows binary
// data.
func kindOfText(path string) (Kind, error) {
	f, err := os.Open(path)
	if err != nil {
		return Other, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, binarySniff)
	head, err := br.Peek(binarySniff)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return Other, err
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return Other, nil
	}
	// Serving logs and ledgers first, from their first records: a day of
	// serving logs is hundreds of megabytes, which are read once, by the
	// parser. memlog's tests run regexps over the whole file.
	first, err := io.ReadAll(io.LimitReader(br, HeadBytes))
	if err != nil {
		return Other, err
	}
	if pools.Detect(first) || ledger.Detect(first) {
		return Text, nil
	}
	whole := bytes.NewBuffer(first)
	if _, err := whole.ReadFrom(br); err != nil {
		return Other, err
	}
	data := whole.Bytes()
	if pools.Detect(data) || ledger.Detect(data) {
		return Text, nil
	}
	switch memlog.Detect(data) {
	case memlog.FormatCSV:
		return MemoryLog, nil
	case memlog.FormatSummary, memlog.FormatOOM:
		return Text, nil
	}
	return Other, nil
}
