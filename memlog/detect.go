package memlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Format names one of the inputs this package reads.
type Format uint8

const (
	FormatUnknown Format = iota
	FormatCSV            // memory-log CSV: ParseCSV
	FormatOOM            // text holding an OOM message: ParseOOMMessages
	FormatSummary        // text holding a memory_summary table: ParseMemorySummaries
)

func (f Format) String() string {
	switch f {
	case FormatCSV:
		return "memory-log CSV"
	case FormatOOM:
		return "OOM message"
	case FormatSummary:
		return "memory_summary table"
	}
	return "unknown format"
}

// Detect tells which format data holds, using the same tests the readers
// use to recognize their input, so the reader Detect names will not answer
// ErrUnrecognized.
//
// A CSV is recognized by its first record and wins even though its records
// embed summary tables. Text with both an OOM message and a summary table
// (an OOM handler that prints memory_summary) is FormatOOM, the more
// specific diagnosis; both readers skip foreign text, so a caller that wants
// the table too can run ParseMemorySummaries on the same bytes.
func Detect(data []byte) Format {
	switch {
	case isMemoryLog(data):
		return FormatCSV
	case ContainsOOM(data):
		return FormatOOM
	case summaryTitle.Match(data):
		return FormatSummary
	}
	return FormatUnknown
}

// DetectReader reads r to the end, since an OOM message may come last in a
// long log, and returns its format together with a reader that replays
// everything read.
func DetectReader(r io.Reader) (Format, io.Reader, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return FormatUnknown, nil, fmt.Errorf("detecting format: %w", err)
	}
	return Detect(data), bytes.NewReader(data), nil
}

// isMemoryLog reports whether ParseCSV would take data: its first record is
// a memory-log header (even one ParseCSV then rejects as incomplete, so the
// user sees that error) or a record in the recipe's layout.
func isMemoryLog(data []byte) bool {
	rec, err := newCSVReader(bytes.NewReader(data)).Read()
	if err != nil {
		return false
	}
	_, _, err = firstLayout(rec)
	return !errors.Is(err, ErrUnrecognized)
}
