package memlog

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		file string
		want Format
	}{
		{"csv/seed-format.csv", FormatCSV},
		{"csv/messy.csv", FormatCSV},
		{"oom/seed002.txt", FormatOOM},
		{"oom/torch1.2-cached.txt", FormatOOM},
		{"oom/truncated.txt", FormatOOM},
		{"summary/seed003.txt", FormatSummary},
		{"summary/abbreviated-old.txt", FormatSummary},
		{"summary/oom-handler.log", FormatOOM}, // both; the OOM message is the diagnosis
		{"summary/seed003.json", FormatUnknown},
	}
	for _, tt := range tests {
		data, err := os.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Detect(data); got != tt.want {
			t.Errorf("Detect(%s) = %v, want %v", tt.file, got, tt.want)
		}
	}
}

// TestDetectMatchesReaders checks Detect's promise: the reader it names
// accepts the input.
func TestDetectMatchesReaders(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch Detect(data) {
		case FormatCSV:
			_, err = ParseCSV(strings.NewReader(string(data)), path)
		case FormatOOM:
			_, err = ParseOOMMessages(strings.NewReader(string(data)))
		case FormatSummary:
			_, err = ParseMemorySummaries(strings.NewReader(string(data)))
		default:
			continue
		}
		if err != nil {
			t.Errorf("%s: detected as %v, but: %v", path, Detect(data), err)
		}
	}
}

func TestDetectReader(t *testing.T) {
	const in = "timestamp,memory_summary,memory_allocated,memory_reserved\n2025-01-01 00:00:00,,1.00,2.00\n"
	f, r, err := DetectReader(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if f != FormatCSV {
		t.Errorf("format = %v, want %v", f, FormatCSV)
	}
	replayed, err := io.ReadAll(r)
	if err != nil || string(replayed) != in {
		t.Errorf("replayed %q, %v; want the input", replayed, err)
	}
}

func TestFormatString(t *testing.T) {
	for f, want := range map[Format]string{
		FormatUnknown: "unknown format", FormatCSV: "memory-log CSV",
		FormatOOM: "OOM message", FormatSummary: "memory_summary table",
	} {
		if got := f.String(); got != want {
			t.Errorf("Format(%d).String() = %q, want %q", f, got, want)
		}
	}
}
