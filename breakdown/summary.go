package breakdown

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// Summary is one device's category totals at one moment: the record that
// breakdown --json prints per device, and analyze and explain per peak,
// end and step.
type Summary struct {
	Device int `json:"device"`
	At     At  `json:"at"`
	// TotalBytes is the allocated bytes at At (block sizes).
	TotalBytes int64 `json:"total_bytes"`
	// Categories has every category of the breakdown, 0 included.
	Categories map[Category]int64 `json:"categories"`
}

// Summary returns the category totals at a.
func (b *Breakdown) Summary(a At) Summary {
	return b.summary(a, b.summaries([]int{a.Event})[0])
}

// Describe says what a table's largest categories are, for a sentence:
// "3.9 GiB of activation, 1.1 GiB of optimizer state and 512.0 MiB of
// parameter". It names at most n, and only those of at least 5% of the
// total; "" for an empty table.
func Describe(t Table, n int) string {
	var parts []string
	rows := slices.Clone(t.Rows)
	slices.SortStableFunc(rows, func(x, y Row) int { return cmp.Compare(y.Bytes, x.Bytes) })
	for _, r := range rows {
		if len(parts) == n || r.Bytes <= 0 || r.Bytes*20 < t.Total {
			break
		}
		name := r.Name
		if r.Category != "" {
			name = r.Category.Title()
		}
		parts = append(parts, fmt.Sprintf("%s of %s", units.Bytes(r.Bytes), name))
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
