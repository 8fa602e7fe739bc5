package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/vramscope/vramscope/internal/pickle"
)

// hostile is an input made to cost memory: raw, or gzip-compressed as it
// is generated (a bomb, never held whole).
type hostile struct {
	name string
	gen  func(w io.Writer) // writes the pickle
	gz   bool
	want string // in the error
}

// repeat writes head, then unit n times, then tail.
func repeat(head, unit string, n int, tail string) func(io.Writer) {
	return func(w io.Writer) {
		io.WriteString(w, head)
		b := []byte(strings.Repeat(unit, 4096))
		left := n
		for ; left >= 4096; left -= 4096 {
			w.Write(b)
		}
		io.WriteString(w, strings.Repeat(unit, left))
		io.WriteString(w, tail)
	}
}

// sparsePuts memoizes one value under a million ids far apart (LONG_BINPUT),
// each a map entry instead of a slot.
func sparsePuts(w io.Writer) {
	io.WriteString(w, "\x80\x04K\x01")
	var op [5]byte
	op[0] = 'r'
	for i := uint32(0); i < 1_000_000; i++ {
		binary.LittleEndian.PutUint32(op[1:], 1000+i*7)
		w.Write(op[:])
	}
	io.WriteString(w, ".")
}

var hostileInputs = []hostile{
	{"two million empty lists", repeat("\x80\x04", "]", 2_000_000, "."), false, "open containers outgrew the memory budget"},
	{"deep nesting", repeat("\x80\x04", "](", 1_000_000, "."), false, "outgrew the memory budget"},
	{"values flood the stack", repeat("\x80\x04", "K\x01", 2_000_000, "."), false, "the stack outgrew the memory budget"},
	{"DUP floods a list", repeat("\x80\x04](K\x01", "2", 4_000_000, "e."), false, "the stack outgrew the memory budget"},
	{"memo gets fill a list", repeat("\x80\x04K\x01\x94](", "h\x00h\x00h\x00h\x00e(", 1_000_000, "e."), false, "container items outgrew the memory budget"},
	{"memo flood", repeat("\x80\x04K\x01", "\x94", 5_000_000, "."), false, "the memo outgrew the memory budget"},
	{"sparse memo flood", sparsePuts, false, "the memo outgrew the memory budget"},
	{"self-referencing lists", repeat("\x80\x04]\x94(", "h\x00", 100_000, "e."), false, "a container contains itself"},
	{"tuples of memo gets", repeat("\x80\x04K\x01\x94", "h\x00h\x00h\x00\x87", 500_000, "."), false, "outgrew the memory budget"},
	{"string claims 2^40 bytes", repeat("\x80\x04\x8d\x00\x00\x00\x00\x00\x01\x00\x00", "a", 1<<20, ""), true, "exceeds the limit"},
	{"string claims 4 GiB", repeat("\x80\x04X\xff\xff\xff\xff", "a", 1<<20, ""), false, "exceeds the limit"},
	{"bomb: zeros", repeat("", "\x00", 1<<30, ""), true, "a gzip stream whose content is not a pickle"},
	{"bomb: the stack", repeat("\x80\x04", "K\x01", 1<<29, "."), true, "the stack outgrew the memory budget"},
	{"bomb: one list of ints", repeat("\x80\x04](", "K\x01K\x02K\x03K\x04", 1<<27, "e."), true, "outgrew the memory budget"},
	{"bomb: empty dicts", repeat("\x80\x04](", "}", 1<<30, "e."), true, "outgrew the memory budget"},
}

// hostileEnv names the input a child process of TestHostileMemory decodes.
const hostileEnv = "VRAMSCOPE_HOSTILE_INPUT"

// TestHostileMemory decodes each hostile input in a process of its own and
// checks the error and the process's peak RSS: no more than a process that
// decoded a small fixture, plus 4 times the budget for what the input
// holds (the garbage collector lets the heap reach twice what is live, and
// a slice that grew leaves its old copies to it) plus the raw input where
// the test holds it.
func TestHostileMemory(t *testing.T) {
	if name := os.Getenv(hostileEnv); name != "" {
		decodeHostile(name)
		return
	}
	if testing.Short() {
		t.Skip("-short: decodes each hostile input in a child process to measure its peak RSS; the full go test ./... (.ci/run) runs it")
	}
	base := peakRSS(t, "baseline")
	t.Logf("baseline: %d MiB", base>>20)
	for _, h := range hostileInputs {
		t.Run(h.name, func(t *testing.T) {
			out, peak := runHostile(t, h.name)
			if !strings.Contains(out, h.want) {
				t.Fatalf("error = %s, want it to contain %q", out, h.want)
			}
			var size countWriter
			h.gen(&size)
			// Compressed input is budgeted by what was decompressed:
			// count at most the bytes the error says were read, at
			// least the window the reader runs ahead.
			allowed := 4 * budgetFor(int64(size))
			held := int64(0)
			if h.gz {
				allowed = 4 * budgetFor(16<<20)
			} else {
				held = int64(size)
			}
			t.Logf("peak RSS %d MiB above the baseline, allowed %d MiB: %s", (peak-base)>>20, (allowed+held)>>20, out)
			if peak-base > allowed+held {
				t.Errorf("peak RSS %d MiB above the baseline, over %d MiB", (peak-base)>>20, (allowed+held)>>20)
			}
		})
	}
}

// Every cut of a small fixture at an opcode boundary fails with an error
// naming an offset, within the budget for the bytes left: one child
// process per fixture decodes all of its cuts, one after another, and its
// peak RSS is the most any of them reached (what a cut leaves is garbage
// by the next).
func TestTruncatedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: decodes every truncation in child processes to measure their peak RSS; the full go test ./... (.ci/run) runs it")
	}
	base := peakRSS(t, "baseline")
	for _, name := range []string{"cpp_pickled.pickle", "default.pickle", "graphs_pools.pickle"} {
		t.Run(name, func(t *testing.T) {
			out, peak := runHostile(t, truncationsOf+name)
			var cuts, size int
			if _, err := fmt.Sscanf(out, "%d cuts of %d bytes failed", &cuts, &size); err != nil {
				t.Fatalf("child: %s", out)
			}
			allowed := 4 * budgetFor(int64(size))
			t.Logf("%d cuts, peak RSS %d MiB above the baseline, allowed %d MiB", cuts, (peak-base)>>20, allowed>>20)
			if cuts < size/16 {
				t.Errorf("%d opcode boundaries in %d bytes, want one per 16 bytes at least", cuts, size)
			}
			if peak-base > allowed {
				t.Errorf("peak RSS %d MiB above the baseline, over %d MiB", (peak-base)>>20, allowed>>20)
			}
		})
	}
}

// truncationsOf, then a fixture's name, names the child that cuts it.
const truncationsOf = "truncations of "

// decodeTruncations is the child of TestTruncatedMemory: it decodes the
// fixture cut at each opcode boundary (where DecodeTo stops exactly) and
// prints how many, or the first cut that did not fail as it should.
func decodeTruncations(name string) {
	raw, err := os.ReadFile("testdata/format/" + name)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	d := pickle.NewDecoder(bytes.NewReader(raw), newBuilder(), pickle.DefaultLimits)
	cuts := 0
	for off := int64(1); off < int64(len(raw)); off++ {
		if at, err := d.DecodeTo(off); err != nil || !at {
			continue
		}
		if _, err := Decode(bytes.NewReader(raw[:off])); err == nil || !strings.Contains(err.Error(), "offset") {
			fmt.Printf("cut at %d: %v\n", off, err)
			os.Exit(1)
		}
		cuts++
	}
	fmt.Printf("%d cuts of %d bytes failed\n", cuts, len(raw))
	os.Exit(0)
}

func budgetFor(n int64) int64 {
	b := pickle.DefaultBudget
	return b.Base + b.PerByte*n
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// peakRSS runs the child for name and returns its peak RSS.
func peakRSS(t *testing.T, name string) int64 {
	_, peak := runHostile(t, name)
	return peak
}

func runHostile(t *testing.T, name string) (string, int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileMemory$")
	cmd.Env = append(os.Environ(), hostileEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child for %q: %v\n%s", name, err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return strings.TrimSpace(string(out)), ru.Maxrss << 10
}

// decodeHostile is the child: it decodes the named input and prints the
// error.
func decodeHostile(name string) {
	if f, ok := strings.CutPrefix(name, truncationsOf); ok {
		decodeTruncations(f)
	}
	if name == "baseline" {
		raw, _ := os.ReadFile("testdata/format/default.pickle")
		_, err := Read(bytes.NewReader(raw))
		fmt.Println("baseline:", err)
		os.Exit(0)
	}
	for _, h := range hostileInputs {
		if h.name != name {
			continue
		}
		var r io.Reader
		if h.gz {
			pr, pw := io.Pipe()
			go func() {
				zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
				h.gen(zw)
				zw.Close()
				pw.Close()
			}()
			r = pr
		} else {
			var size countWriter
			h.gen(&size)
			b := bytes.NewBuffer(make([]byte, 0, size))
			h.gen(b)
			r = b
		}
		_, err := Read(r)
		fmt.Println(err)
		os.Exit(0)
	}
	fmt.Println("no such input")
	os.Exit(1)
}
