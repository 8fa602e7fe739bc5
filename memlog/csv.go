package memlog

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/vramscope/vramscope/internal/units"
)

// Series is a memory log: one sample per record, in file order.
type Series struct {
	Samples []Sample
	// Warnings holds a *SyntaxError for every record that was skipped.
	Warnings []error
}

// Sample is one record of a memory log.
//
// The recipe prints sizes in MB with two decimals, so Allocated and Reserved
// are within 0.005 MiB (about 5 KiB) of torch's byte counts.
type Sample struct {
	Line      int         // 1-based line where the record starts
	Time      time.Time   // see parseTime for the time zone
	Allocated units.Bytes // torch.cuda.memory_allocated()
	Reserved  units.Bytes // torch.cuda.memory_reserved()
	// Summary is the record's memory_summary() text with the writer's ';'
	// turned back into ',' (the table itself never contains ';'); "" when
	// the log has no summary column. ParseMemorySummaries reads it.
	Summary string
}

// ParseCSV reads a memory log in the layout of the SGLang recipe (seed 003):
//
//	timestamp,memory_summary,memory_allocated,memory_reserved
//	2025-08-11 10:15:02,"|===...| PyTorch CUDA memory summary; device ID 0 |...",180.32,230.00
//
// The header may name the columns in any order, with any case, extra
// columns and unit suffixes; a file without a header must use the recipe's
// column order; a header repeated later (a job appending a new run) is
// followed from there on. Blank lines are skipped. A record that cannot be
// read becomes a *SyntaxError in Series.Warnings naming file and line, and
// reading goes on. The error wraps ErrUnrecognized when the first record is
// neither a memory-log header nor a record in the recipe's layout.
func ParseCSV(r io.Reader, file string) (*Series, error) {
	cr := newCSVReader(r)
	rec, err := cr.Read()
	if err != nil {
		if err == io.EOF || errors.As(err, new(*csv.ParseError)) {
			return nil, fmt.Errorf("%s: not a memory log: %w", file, ErrUnrecognized)
		}
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	layout, isHeader, err := firstLayout(rec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s := &Series{}
	if !isHeader {
		s.add(file, cr, layout, rec)
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return s, nil
		}
		var perr *csv.ParseError
		if errors.As(err, &perr) {
			s.warn(file, perr.StartLine, perr.Err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a line of spaces: as blank as the empty lines encoding/csv skips
		}
		// A header again, from a job that appended a new run to the log.
		if l, isHeader, err := headerLayout(rec); (isHeader || err != nil) && !looksLikeData(rec) {
			if err != nil {
				line, _ := cr.FieldPos(0)
				s.warn(file, line, err.Error())
			} else {
				layout = l
			}
			continue
		}
		s.add(file, cr, layout, rec)
	}
}

// looksLikeData reports whether a record has a number or a timestamp in it,
// which no header has; it keeps a data record whose text happens to contain
// column-like words from being taken for a header.
func looksLikeData(rec []string) bool {
	for _, f := range rec {
		if _, err := parseTime(f); err == nil {
			return true
		}
	}
	return false
}

// newCSVReader configures encoding/csv for memory logs: records may have
// any number of fields, and a quoted field may span lines (the summary
// table does).
func newCSVReader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	return cr
}

// firstLayout decides from a log's first record whether it is a memory log
// at all, and in which layout.
func firstLayout(rec []string) (l csvLayout, isHeader bool, err error) {
	l, isHeader, err = headerLayout(rec)
	if isHeader || err != nil {
		return l, isHeader, err
	}
	// Header-less: trust the recipe's layout only when the first field is a
	// date and time (a bare number could start any CSV) and the size columns
	// are numbers (a Python log line, "2025-06-02 11:04:17,123 INFO ...",
	// also starts with a date and a comma).
	if len(rec) >= seedLayout.width && !isNumber(rec[0]) && isNumber(rec[2]) && isNumber(rec[3]) {
		if _, err := parseTime(rec[0]); err == nil {
			return seedLayout, false, nil
		}
	}
	return csvLayout{}, false, fmt.Errorf("not a memory log: %w", ErrUnrecognized)
}

// add appends the sample in rec, or a warning saying why it has none.
func (s *Series) add(file string, cr *csv.Reader, l csvLayout, rec []string) {
	line, _ := cr.FieldPos(0)
	if len(rec) < l.width {
		s.warn(file, line, fmt.Sprintf("want at least %d fields, got %d", l.width, len(rec)))
		return
	}
	t, err := parseTime(rec[l.time])
	if err != nil {
		s.warn(file, line, fmt.Sprintf("%s: %v", l.names[0], err))
		return
	}
	alloc, err := parseLogSize(rec[l.allocated], l.allocatedUnit)
	if err != nil {
		s.warn(file, line, fmt.Sprintf("%s: %v", l.names[2], err))
		return
	}
	reserved, err := parseLogSize(rec[l.reserved], l.reservedUnit)
	if err != nil {
		s.warn(file, line, fmt.Sprintf("%s: %v", l.names[3], err))
		return
	}
	smp := Sample{Line: line, Time: t, Allocated: alloc, Reserved: reserved}
	if l.summary >= 0 {
		smp.Summary = strings.ReplaceAll(rec[l.summary], ";", ",")
	}
	s.Samples = append(s.Samples, smp)
}

func (s *Series) warn(file string, line int, msg string) {
	s.Warnings = append(s.Warnings, &SyntaxError{File: file, Line: line, Msg: msg})
}

// timeLayouts are the timestamp forms seen in memory logs. Time.Parse also
// accepts fractional seconds after the seconds field of each.
var timeLayouts = []string{
	time.DateTime, // the recipe's time.strftime("%Y-%m-%d %H:%M:%S")
	"2006-01-02T15:04:05",
	time.RFC3339,
	"2006-01-02 15:04:05Z07:00",
	"2006/01/02 15:04:05",
}

// parseTime reads a timestamp. The recipe writes local time without an
// offset, and such times come back in UTC with the clock reading unchanged:
// the zone is unknown, so only intervals between samples are meaningful.
// A bare number is seconds since the Unix epoch (Python's time.time()).
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if isNumber(s) {
		sec, err := strconv.ParseFloat(s, 64)
		if err == nil && sec >= 0 && sec < 1e11 {
			whole, frac := math.Modf(sec)
			return time.Unix(int64(whole), int64(frac*1e9)).UTC(), nil
		}
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a timestamp", s)
}

// isNumber reports whether s is a plain decimal like "1723012345.25".
func isNumber(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && strings.Trim(s, "0123456789.") == "" && strings.Count(s, ".") <= 1 && s != "."
}

// parseLogSize reads a size column: a plain number in the column's unit, or
// a number with its own unit ("1.5 GiB").
func parseLogSize(s string, unit units.Bytes) (units.Bytes, error) {
	s = strings.TrimSpace(s)
	if !isNumber(s) {
		b, err := units.ParseBytes(s)
		if err == nil && b < 0 {
			return 0, fmt.Errorf("negative size %q", s)
		}
		return b, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v*float64(unit) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q out of range", s)
	}
	return units.Bytes(math.Round(v * float64(unit))), nil
}
