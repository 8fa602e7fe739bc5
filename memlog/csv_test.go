package memlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/units"
)

func openTestdata(t *testing.T, elem ...string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join(append([]string{"testdata"}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestParseCSVSeedFormat reads a log written by seed 003's logging code
// (header, abbreviated memory_summary quoted with ';' for ',', MB values).
func TestParseCSVSeedFormat(t *testing.T) {
	s, err := ParseCSV(openTestdata(t, "csv", "seed-format.csv"), "seed-format.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings: %v", s.Warnings)
	}
	mb := func(v float64) units.Bytes { return units.Bytes(v * float64(units.MiB)) }
	want := []struct {
		line                int
		time                string
		allocated, reserved units.Bytes
	}{
		{2, "2025-08-11 10:15:02", mb(17531.00), mb(18432.00)},
		{32, "2025-08-11 10:15:03", mb(17539.00), mb(18432.00)},
		{62, "2025-08-11 10:15:04", mb(17547.00), mb(18452.00)},
		{92, "2025-08-11 10:15:05", mb(17555.00), mb(18452.00)},
	}
	if len(s.Samples) != len(want) {
		t.Fatalf("got %d samples, want %d", len(s.Samples), len(want))
	}
	for i, w := range want {
		got := s.Samples[i]
		if got.Line != w.line || got.Time.Format(time.DateTime) != w.time || got.Allocated != w.allocated || got.Reserved != w.reserved {
			t.Errorf("sample %d = line %d %s %v %v, want line %d %s %v %v", i,
				got.Line, got.Time.Format(time.DateTime), got.Allocated, got.Reserved,
				w.line, w.time, w.allocated, w.reserved)
		}
	}
	// The summary comes back as torch printed it, and parses.
	sum := s.Samples[3].Summary
	if !strings.Contains(sum, "PyTorch CUDA memory summary, device ID 0") || strings.Contains(sum, ";") {
		t.Errorf("summary not restored:\n%s", sum)
	}
	tables, err := ParseMemorySummaries(strings.NewReader(sum))
	if err != nil {
		t.Fatal(err)
	}
	if got := tables[0].Allocated.All.Current; got != 17555*units.MiB {
		t.Errorf("summary Allocated = %v, want %v", got, 17555*units.MiB)
	}
	if !tables[0].Abbreviated {
		t.Error("the recipe's summary is abbreviated")
	}
}

// TestParseCSVMessy reads a log with a header of its own (other order, unit
// suffixes, extra columns), blank lines, bad records, a second header
// appended by a later run, and a final record cut off inside a quote.
func TestParseCSVMessy(t *testing.T) {
	s, err := ParseCSV(openTestdata(t, "csv", "messy.csv"), "messy.csv")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return tm
	}
	wantSamples := []Sample{
		{Line: 2, Time: at("2025-08-11T10:15:02.25Z"), Allocated: 1024 * units.MiB, Reserved: 2048 * units.MiB},
		{Line: 5, Time: at("2025-08-11T10:15:03.25Z"), Allocated: 1030*units.MiB + 512*units.KiB, Reserved: 2048 * units.MiB},
		{Line: 9, Time: at("2025-08-11T10:15:07.25Z"), Allocated: 3 * units.GiB / 2, Reserved: 5 * units.GiB / 2},
		{Line: 12, Time: at("2025-08-11T10:15:10.5Z"), Allocated: 5 * units.GiB / 4, Reserved: 2 * units.GiB},
	}
	if !reflect.DeepEqual(s.Samples, wantSamples) {
		t.Errorf("samples:\n got %+v\nwant %+v", s.Samples, wantSamples)
	}
	wantWarnings := []string{
		`messy.csv:6: memory_allocated (MB): parsing size "lots": no number: not a size`,
		`messy.csv:7: Timestamp: "not-a-time" is not a timestamp`,
		`messy.csv:8: want at least 5 fields, got 2`,
		`messy.csv:10: bare " in non-quoted-field`,
		`messy.csv:13: memory_allocated_gb: negative size "-1.00"`,
		`messy.csv:14: extraneous or missing " in quoted-field`,
	}
	var got []string
	for _, w := range s.Warnings {
		var se *SyntaxError
		if !errors.As(w, &se) {
			t.Errorf("warning %v is a %T, want *SyntaxError", w, w)
		}
		got = append(got, w.Error())
	}
	if !reflect.DeepEqual(got, wantWarnings) {
		t.Errorf("warnings:\n got %q\nwant %q", got, wantWarnings)
	}
}

func TestParseCSVHeaders(t *testing.T) {
	tests := []struct {
		name, in  string
		allocated units.Bytes
	}{
		{"recipe header", "timestamp,memory_summary,memory_allocated,memory_reserved\n2025-01-01 00:00:00,,1.00,2.00\n", units.MiB},
		{"no header", "2025-01-01 00:00:00,\"|x|\",1.00,2.00\n", units.MiB},
		{"CRLF, capitals", "TIME,Allocated,Reserved\r\n2025-01-01 00:00:00,1.00,2.00\r\n", units.MiB},
		{"bytes", "ts,allocated_bytes,reserved_bytes\n1735689600,1048576,2097152\n", units.MiB},
		{"GiB suffix", "time,allocated[GiB],reserved[GiB]\n2025-01-01T00:00:00Z,0.5,1\n", units.GiB / 2},
		{"legacy cached name, extra max column", "timestamp,max_memory_allocated,memory_allocated,memory_cached\n2025-01-01 00:00:00,9,1,2\n", units.MiB},
		{"values with units", "timestamp,memory_allocated,memory_reserved\n2025-01-01 00:00:00,1 MiB,2GiB\n", units.MiB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseCSV(strings.NewReader(tt.in), "log.csv")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Warnings) != 0 || len(s.Samples) != 1 || s.Samples[0].Allocated != tt.allocated {
				t.Errorf("got samples %+v, warnings %v; want one with Allocated %v", s.Samples, s.Warnings, tt.allocated)
			}
		})
	}
}

func TestParseCSVErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
		unrecognized   bool
	}{
		{"empty", "", "log.csv: not a memory log: unrecognized format", true},
		{"OOM text", "Traceback (most recent call last):\n  File \"x.py\", line 1\n", "log.csv: not a memory log: unrecognized format", true},
		{"python log line", "2025-06-02 11:04:17,123 INFO step 1, loss 2.5, lr 1e-4\n", "log.csv: not a memory log: unrecognized format", true},
		{"other CSV", "name,value\nx,1\n", "log.csv: not a memory log: unrecognized format", true},
		{"epoch numbers", "1700000000,2,3,4\n", "log.csv: not a memory log: unrecognized format", true},
		{"header without reserved", "timestamp,memory_allocated\n2025-01-01 00:00:00,1\n",
			`log.csv: memory log header "timestamp,memory_allocated" has no reserved column`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCSV(strings.NewReader(tt.in), "log.csv")
			if err == nil || err.Error() != tt.want || errors.Is(err, ErrUnrecognized) != tt.unrecognized {
				t.Errorf("error = %v, want %q (unrecognized: %v)", err, tt.want, tt.unrecognized)
			}
		})
	}
}

func TestSyntaxErrorString(t *testing.T) {
	err := &SyntaxError{File: "run.csv", Line: 12, Msg: "want at least 4 fields, got 1"}
	if got, want := err.Error(), "run.csv:12: want at least 4 fields, got 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
