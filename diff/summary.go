package diff

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// summarize says in one sentence what a device's comparison found: how
// much more (or less) B holds and reserves at the moment, and the largest
// difference of each table ("B holds 1.95 GiB more allocated memory than A
// and reserves 2.10 GiB more; the largest difference: compute_logprobs
// (peak_upcast.py), +2.24 GiB, added; by category temporary, +1.95 GiB,
// grown; ...").
func summarize(d Device) string {
	delta := d.Delta.AllocatedBytes
	var b strings.Builder
	switch {
	case d.A.Device < 0:
		fmt.Fprintf(&b, "only B has this device: %s allocated", units.Bytes(d.B.AllocatedBytes))
	case d.B.Device < 0:
		fmt.Fprintf(&b, "only A has this device: %s allocated", units.Bytes(d.A.AllocatedBytes))
	case delta > 0:
		fmt.Fprintf(&b, "B holds %s more allocated memory than A", units.Bytes(delta))
	case delta < 0:
		fmt.Fprintf(&b, "B holds %s less allocated memory than A", units.Bytes(-delta))
	default:
		b.WriteString("B holds as much allocated memory as A")
	}
	if r := d.Delta.ReservedBytes; d.A.Device >= 0 && d.B.Device >= 0 {
		switch {
		case r > 0:
			fmt.Fprintf(&b, " and reserves %s more", units.Bytes(r))
		case r < 0:
			fmt.Fprintf(&b, " and reserves %s less", units.Bytes(-r))
		}
	}
	lead := "; the largest difference: "
	for _, t := range []struct {
		table *Table
		what  string
	}{{d.Callsites, ""}, {d.Categories, "by category "}, {d.Modules, "by module "}} {
		if t.table == nil || len(t.table.Rows) == 0 {
			continue
		}
		r := t.table.Rows[0]
		fmt.Fprintf(&b, "%s%s%s, %s%s, %s", lead, t.what, r.Name, sign(r.DeltaBytes), units.Bytes(r.DeltaBytes), r.Change)
		lead = "; "
	}
	return b.String()
}

// sign is "+" for a growth, "" otherwise (a shrink prints its own "-").
func sign(n int64) string {
	if n > 0 {
		return "+"
	}
	return ""
}
