package pickle

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"os"
	"testing"
)

// nopSink keeps nothing: the benchmarks below measure the VM alone.
type nopSink struct{}

func (nopSink) String([]byte, bool) (Value, error) { return Value{Kind: KindString}, nil }
func (nopSink) Open(Handle, Container) error       { return nil }
func (nopSink) SetItems(Handle, []Value) error     { return nil }
func (nopSink) Append(Handle, []Value) error       { return nil }
func (nopSink) Close(Handle) (Value, error)        { return Value{Kind: KindUser}, nil }
func (nopSink) Tuple([]Value) (Value, error)       { return Value{Kind: KindUser}, nil }

// BenchmarkMemoReads decodes a list of 1000 BINGETs per APPENDS batch, the
// opcode that is 68% of a real snapshot (pickle-bench.md).
func BenchmarkMemoReads(b *testing.B) {
	var p bytes.Buffer
	p.WriteString("\x80\x04K\x07\x94]\x94")
	const batches = 1000
	for i := 0; i < batches; i++ {
		p.WriteByte('(')
		p.Write(bytes.Repeat([]byte("h\x00"), 1000))
		p.WriteByte('e')
	}
	p.WriteString("0.") // POP the list, STOP on the int
	raw := p.Bytes()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewDecoder(bytes.NewReader(raw), nopSink{}, DefaultLimits).Decode(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(batches*1000), "ns/op-code")
}

// BenchmarkWalk walks the GPU-made bench seed (26 MB, 330 k trace entries)
// to its end, as a stretch's walker does before the tails start: what
// each byte costs a split decode besides decoding it.
func BenchmarkWalk(b *testing.B) {
	raw := gunzipFile(b, "../../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := NewDecoder(bytes.NewReader(raw), nopSink{}, DefaultLimits).Walk(math.MaxInt64); !errors.Is(err, ErrNoSplit) {
			b.Fatalf("walk ended with %v, want ErrNoSplit at the end", err)
		}
	}
}

// gunzipFile is the gzipped file at path, decompressed.
func gunzipFile(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// BenchmarkCount walks the bench seed from a frame past its start to its
// end counting its memo entries, as the walkers of all stretches but the
// first do before the tails start (BenchmarkWalk's walk keeps them).
func BenchmarkCount(b *testing.B) {
	raw := gunzipFile(b, "../../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	proto, starts, err := FramesNear(bytes.NewReader(raw), int64(len(raw)), []int64{2})
	if err != nil || starts[0] < 0 {
		b.Fatalf("no frame: %v", err)
	}
	from := starts[0]
	b.SetBytes(int64(len(raw)) - from)
	for b.Loop() {
		d := NewDecoder(bytes.NewReader(raw[from:]), nopSink{}, DefaultLimits)
		d.Stretch(from, proto)
		d.Counting()
		if _, err := d.Walk(math.MaxInt64); !d.AtEnd() {
			b.Fatalf("the count ended with %v at %d of %d", err, d.Offset(), len(raw))
		}
	}
}
