package memlog

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/vramscope/vramscope/internal/units"
)

// csvLayout says which column of a memory-log record holds what.
type csvLayout struct {
	time, summary, allocated, reserved int // column index; -1 when absent (summary only)
	allocatedUnit, reservedUnit        units.Bytes
	names                              [4]string // header names of the columns above, for messages
	width                              int       // fields a record needs to reach every column
}

// seedLayout is the header-less layout of the SGLang recipe's records:
// timestamp, quoted memory_summary, then memory_allocated and
// memory_reserved in MB, which the recipe computes as bytes / (1024*1024),
// i.e. MiB.
var seedLayout = csvLayout{
	time: 0, summary: 1, allocated: 2, reserved: 3,
	allocatedUnit: units.MiB, reservedUnit: units.MiB,
	names: [4]string{"timestamp", "memory_summary", "memory_allocated", "memory_reserved"},
	width: 4,
}

// headerLayout recognizes a header record by its column names, tolerating
// case, order, extra columns and unit suffixes ("memory_allocated (MB)",
// "reserved_gib"). It returns ok=false when rec is not a memory-log header,
// and an error when it is one that lacks a column the reader needs.
func headerLayout(rec []string) (l csvLayout, ok bool, err error) {
	l = csvLayout{time: -1, summary: -1, allocated: -1, reserved: -1}
	for i, field := range rec {
		// The first column of each role wins; later duplicates are extras.
		switch role, unit := columnRole(field); {
		case role == "time" && l.time < 0:
			l.time = i
		case role == "summary" && l.summary < 0:
			l.summary = i
		case role == "allocated" && l.allocated < 0:
			l.allocated, l.allocatedUnit = i, unit
		case role == "reserved" && l.reserved < 0:
			l.reserved, l.reservedUnit = i, unit
		}
	}
	if l.time < 0 || l.allocated < 0 && l.reserved < 0 {
		return csvLayout{}, false, nil
	}
	if l.allocated < 0 || l.reserved < 0 {
		missing := "reserved"
		if l.allocated < 0 {
			missing = "allocated"
		}
		return csvLayout{}, true, fmt.Errorf("memory log header %q has no %s column", strings.Join(rec, ","), missing)
	}
	for i, col := range []int{l.time, l.summary, l.allocated, l.reserved} {
		if col >= 0 {
			l.names[i] = strings.TrimSpace(rec[col])
			l.width = max(l.width, col+1)
		}
	}
	return l, true, nil
}

// columnRole classifies a header name and, for a size column, the unit its
// values are in: an explicit suffix ("_mb", "(GiB)", "[bytes]") or else MB
// (MiB), the recipe's unit.
func columnRole(name string) (role string, unit units.Bytes) {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	unit = units.MiB
	if len(words) > 1 {
		// ParseBytes knows every unit spelling; a word that is none fails.
		if u, err := units.ParseBytes("1 " + words[len(words)-1]); err == nil {
			unit = u
			words = words[:len(words)-1]
		}
	}
	has := func(w ...string) bool {
		return slices.ContainsFunc(words, func(x string) bool { return slices.Contains(w, x) })
	}
	switch {
	case has("max", "peak"): // max_memory_allocated and the like are not the series
		return "", 0
	case has("timestamp", "time", "datetime", "date", "ts"):
		return "time", 0
	case has("summary"):
		return "summary", 0
	case has("allocated"):
		return "allocated", unit
	case has("reserved", "cached"): // memory_cached is memory_reserved's pre-1.4 name
		return "reserved", unit
	}
	return "", 0
}
