package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// Pickles written by Python whose loading would run os.system("echo
// pwned"): the decoder must refuse the import opcode, by name and offset,
// before anything else happens.
func TestRefusesCode(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"os_system_p0.pickle", "offset 52: opcode GLOBAL (0x63): refused"},
		{"os_system_p2.pickle", "offset 50: opcode GLOBAL (0x63): refused"},
		{"os_system_p4.pickle", "offset 64: opcode STACK_GLOBAL (0x93): refused"},
	} {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/hostile/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(bytes.NewReader(raw))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// A 305-byte pickle whose unknown top-level key holds a list of 2**40
// shared references (x = [y, y], y = [z, z], ...) must not be expanded.
func TestSharedReferenceBomb(t *testing.T) {
	raw, err := os.ReadFile("testdata/hostile/dag_bomb.pickle")
	if err != nil {
		t.Fatal(err)
	}
	sn, err := Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if sn.Unknown["top.future_key"] != 1 {
		t.Errorf("unknown = %v", sn.Unknown)
	}
	if !strings.Contains(fmt.Sprint(sn.Extra["future_key"]), "<truncated>") {
		t.Error("the expansion was not cut off")
	}
}

func TestMalformed(t *testing.T) {
	long9 := append([]byte("\x80\x04\x8a\x09"), bytes.Repeat([]byte{0xff}, 8)...)
	cases := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty", nil, "offset 0: opcode 0x00: unexpected end of input"},
		{"string claims 2^40 bytes", []byte("\x80\x04\x8d\x00\x00\x00\x00\x00\x01\x00\x00"), "string of 1099511627776 bytes exceeds the limit"},
		{"string longer than the file", []byte("\x80\x04X\x00\x00\x20\x00abc"), "offset 2: opcode BINUNICODE (0x58): unexpected end of input"},
		{"memo id never stored", []byte("\x80\x04}\x94h\x05."), "offset 4: opcode BINGET (0x68): memo id 5 was never stored"},
		{"huge memo id", []byte("\x80\x04j\xff\xff\xff\xff."), "memo id 4294967295 was never stored"},
		{"APPENDS without MARK", []byte("\x80\x04]K\x01e."), "offset 5: opcode APPENDS (0x65): no MARK on the stack"},
		{"STOP with open MARK", []byte("\x80\x04(}."), "STOP with 0 values and 1 MARKs left"},
		{"STOP on empty stack", []byte("\x80\x04."), "stack underflow"},
		{"SETITEMS on a list", []byte("\x80\x04](K\x01K\x02u."), "SETITEMS on a list"},
		{"odd SETITEMS", []byte("\x80\x04}(K\x01u."), "odd number of values"},
		{"list contains itself", []byte("\x80\x04]\x94h\x00a."), "a container contains itself"},
		{"LONG1 of 10 bytes", append([]byte("\x80\x04\x8a\x0a"), make([]byte, 10)...), "integer of 10 bytes does not fit in 64 bits"},
		{"LONG1 9 bytes beyond uint64", append(append([]byte{}, long9...), 0x01, '.'), "integer does not fit in 64 bits"},
		{"LONG4 negative length", []byte("\x80\x04\x8b\xff\xff\xff\xff."), "negative LONG4 length"},
		{"unknown opcode", []byte("\x80\x04\xff."), "offset 2: opcode 0xff: unknown opcode"},
		{"protocol 6", []byte("\x80\x06}."), "unsupported pickle protocol 6"},
		{"top is an int", []byte("\x80\x04K\x01."), "top level is an int"},
		{"size is a string", []byte("\x80\x04]}(\x8c\x06action\x8c\x05alloc\x8c\x04size\x8c\x01xua."), `trace entry: "size" is a str, want a non-negative int`},
		{"unknown block state", []byte("\x80\x04}(\x8c\x05state\x8c\x04gone\x8c\x04size\x4b\x01u."), `block: unknown state "gone"`},
		{"sets refused", []byte("\x80\x04\x8f."), "sets and out-of-band buffers never appear"},
		{"BUILD refused", []byte("\x80\x04}}b."), "opcode BUILD (0x62): refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// 2**64-1 as a 9-byte LONG1 is the "unknown line" torch writes.
func TestNineByteLong(t *testing.T) {
	in := []byte("\x80\x04]}(\x8c\x04name\x8c\x01f\x8c\x08filename\x8c\x01x\x8c\x04line\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00ua.")
	// A list holding one frame is a stack; wrap it as a 1.x segment list is
	// not possible, so decode through the builder directly.
	b := newBuilder()
	if _, err := decodeWith(b, bytes.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if len(b.sn.Frames) != 1 || b.sn.Frames[0].Line != UnknownLine {
		t.Fatalf("frames = %+v", b.sn.Frames)
	}
}

// Four million values on the stack outgrow the memory budget long before
// the stack's limit (pickle's TestStackLimit has that one).
func TestStackOverflow(t *testing.T) {
	in := append([]byte("\x80\x04"), bytes.Repeat([]byte("K\x01"), 1<<22+1)...)
	_, err := Decode(bytes.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "opcode BININT1 (0x4b): the stack outgrew the memory budget") {
		t.Fatalf("err = %v", err)
	}
}

// Every truncation of a real file is an error that names an offset, never a
// panic and never a silent partial result.
func TestTruncated(t *testing.T) {
	for _, c := range []struct {
		name   string
		stride int
	}{{"cpp_pickled.pickle", 1}, {"default.pickle", 7}} {
		name := c.name
		raw, err := os.ReadFile("testdata/format/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(raw); n += c.stride {
			_, err := Decode(bytes.NewReader(raw[:n]))
			if err == nil || !strings.Contains(err.Error(), "offset") {
				t.Fatalf("%s cut at %d: err = %v", name, n, err)
			}
		}
	}
}

// Random byte corruption of real files must end in an error or a decode,
// never a panic.
func TestCorrupted(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, name := range []string{"cpp_pickled.pickle", "default.pickle", "graphs_pools.pickle"} {
		raw, err := os.ReadFile("testdata/format/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2000; i++ {
			bad := append([]byte(nil), raw...)
			for j := 0; j < 1+rng.Intn(4); j++ {
				bad[rng.Intn(len(bad))] = byte(rng.Intn(256))
			}
			Decode(bytes.NewReader(bad)) // must return
		}
	}
}

// zstdFrame is a zstd frame holding content in raw blocks, which declares
// a window of 2^windowLog bytes, or with windowLog 0 is one segment that
// claims a content of claim bytes.
func zstdFrame(windowLog int, claim uint64, content []byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd}
	if windowLog > 0 {
		f = append(f, 0, byte(windowLog-10)<<3)
	} else {
		f = append(f, 0xe0) // one segment, an 8-byte content size
		f = binary.LittleEndian.AppendUint64(f, claim)
	}
	for len(content) > 0 {
		n := min(len(content), 1<<17)
		last := 0
		if n == len(content) {
			last = 1
		}
		h := uint32(n)<<3 | uint32(last) // a raw block
		f = append(f, byte(h), byte(h>>8), byte(h>>16))
		f = append(f, content[:n]...)
		content = content[n:]
	}
	return f
}

// A zstd frame's window is reserved as the frame starts, so it is read
// only up to what a file of its size could fill (MaxWindow), and a wider
// one is refused by name before anything is reserved; a stream of unknown
// size may have 512 MiB. train.pickle is 15 kB.
func TestZstdWindowBound(t *testing.T) {
	raw := readRaw(t, "testdata/format/train.pickle")
	want, err := Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		frame            []byte
		atErr, streamErr string // through ReadAt (the file's size known) and Read
	}{
		{"128 MiB", zstdFrame(27, 0, raw), "", ""},
		{"256 MiB", zstdFrame(28, 0, raw), "window, 256 MiB, is wider than the 128 MiB", ""},
		{"1 GiB", zstdFrame(30, 0, raw), "window, 1024 MiB, is wider than the 128 MiB", "window, 1024 MiB, is wider than the 512 MiB"},
		{"one segment claiming 2 GiB", zstdFrame(0, 2<<30-1, raw), "window, 2047 MiB, is wider than the 128 MiB", "window, 2047 MiB, is wider than the 512 MiB"},
	} {
		for _, read := range []struct {
			how  string
			want string
			read func() (*Snapshot, error)
		}{
			{"ReadAt", tc.atErr, func() (*Snapshot, error) { return ReadAt(bytes.NewReader(tc.frame), int64(len(tc.frame))) }},
			{"Read", tc.streamErr, func() (*Snapshot, error) { return Read(bytes.NewReader(tc.frame)) }},
		} {
			sn, err := read.read()
			switch {
			case read.want == "" && err != nil:
				t.Errorf("%s, %s: %v", tc.name, read.how, err)
			case read.want == "" && !sameSnapshot(sn, want):
				t.Errorf("%s, %s: another snapshot than the raw file's", tc.name, read.how)
			case read.want != "" && (err == nil || !strings.Contains(err.Error(), read.want)):
				t.Errorf("%s, %s: err = %v, want it to say %q", tc.name, read.how, err, read.want)
			}
		}
	}
}

// MaxWindow allows 256 bytes of window a byte of the file, between 128 MiB
// and 2 GiB, and 512 MiB to a stream of unknown size.
func TestMaxWindow(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ size, want int64 }{
		{-1, 512 * mib},
		{15_000, 128 * mib},
		{mib, 256 * mib},
		{4 * mib, 1024 * mib},
		{45 * mib, 2048 * mib},
	} {
		if got := MaxWindow(tc.size); got != tc.want {
			t.Errorf("MaxWindow(%d) = %d MiB, want %d MiB", tc.size, got/mib, tc.want/mib)
		}
	}
}
