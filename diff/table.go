package diff

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/diagnose"
)

// Change is how a row's bytes moved from A to B.
type Change string

const (
	Added     Change = "added"     // nothing in A
	Removed   Change = "removed"   // nothing in B
	Grown     Change = "grown"     // more in B
	Shrunk    Change = "shrunk"    // less in B
	Unchanged Change = "unchanged" // the same bytes
)

// changeOf marks a row with a bytes in A and b in B.
func changeOf(a, b int64) Change {
	switch {
	case a == b:
		return Unchanged
	case a == 0:
		return Added
	case b == 0:
		return Removed
	case b > a:
		return Grown
	}
	return Shrunk
}

// Row is one group's live bytes on both sides: a callsite, a category or a
// module.
type Row struct {
	// Key identifies the group on both sides; Name is how it prints.
	Key    string `json:"key"`
	Name   string `json:"name"`
	Change Change `json:"change"`
	ABytes int64  `json:"a_bytes"`
	BBytes int64  `json:"b_bytes"`
	// DeltaBytes is BBytes - ABytes.
	DeltaBytes int64 `json:"delta_bytes"`
	ABlocks    int   `json:"a_blocks"`
	BBlocks    int   `json:"b_blocks"`
	// Place is a callsite row's place: the user's line and, where it lies
	// below it, the library line that allocated, of the group's largest
	// block in B (in A when B has none).
	Place *Place `json:"place,omitempty"`
}

// Rest sums the rows a Table leaves out.
type Rest struct {
	Rows       int   `json:"rows"`
	ABytes     int64 `json:"a_bytes"`
	BBytes     int64 `json:"b_bytes"`
	DeltaBytes int64 `json:"delta_bytes"`
}

// Table is the live bytes of one moment on both sides, grouped one way:
// rows by absolute difference, largest first, at most Options.Top of
// them, the others summed in Rest. Unchanged rows are left out of Rows
// and counted in Unchanged.
type Table struct {
	Rows []Row `json:"rows"`
	Rest Rest  `json:"rest"`
	// Unchanged counts the groups with the same bytes on both sides, and
	// UnchangedBytes is what they hold on either.
	Unchanged      int   `json:"unchanged"`
	UnchangedBytes int64 `json:"unchanged_bytes"`
}

// group is one group's bytes on one side while a table is built.
type group struct {
	name string
	// loose is a second key, "" for none: the group's key without files,
	// to join a group whose file was renamed.
	loose  string
	bytes  int64
	blocks int
	// largest is the size of the group's largest block, at is its place,
	// and place is at's JSON form, for callsite rows.
	largest uint64
	at      diagnose.Place
	place   *Place
}

// add counts one block of size bytes at pl into g.
func (g *group) add(size uint64, pl diagnose.Place) {
	g.bytes += int64(size)
	g.blocks++
	if size > g.largest || g.blocks == 1 {
		g.largest, g.at = size, pl
	}
}

// newTable joins the groups of both sides and keeps the top rows. Groups
// join by key; then a group of A and one of B that only one of each shares
// a loose key with (the same functions in a renamed file) join too.
func newTable(a, b map[string]*group, top int) Table {
	var rows []Row
	var onlyA, onlyB []string
	for key, ga := range a {
		if gb := b[key]; gb != nil {
			rows = append(rows, newRow(key, ga, gb))
		} else {
			onlyA = append(onlyA, key)
		}
	}
	for key := range b {
		if a[key] == nil {
			onlyB = append(onlyB, key)
		}
	}
	byLoose := func(keys []string, groups map[string]*group) map[string][]string {
		m := map[string][]string{}
		for _, k := range keys {
			if l := groups[k].loose; l != "" {
				m[l] = append(m[l], k)
			}
		}
		return m
	}
	looseA, looseB := byLoose(onlyA, a), byLoose(onlyB, b)
	joined := map[string]bool{}
	for l, ka := range looseA {
		if kb := looseB[l]; len(ka) == 1 && len(kb) == 1 {
			rows = append(rows, newRow(kb[0], a[ka[0]], b[kb[0]]))
			joined[ka[0]], joined[kb[0]] = true, true
		}
	}
	for _, k := range onlyA {
		if !joined[k] {
			rows = append(rows, newRow(k, a[k], nil))
		}
	}
	for _, k := range onlyB {
		if !joined[k] {
			rows = append(rows, newRow(k, nil, b[k]))
		}
	}
	abs := func(v int64) int64 { return max(v, -v) }
	slices.SortFunc(rows, func(p, q Row) int {
		if c := cmp.Compare(abs(q.DeltaBytes), abs(p.DeltaBytes)); c != 0 {
			return c
		}
		if c := cmp.Compare(max(q.ABytes, q.BBytes), max(p.ABytes, p.BBytes)); c != 0 {
			return c
		}
		return cmp.Compare(p.Key, q.Key)
	})
	t := Table{Rows: []Row{}}
	for _, r := range rows {
		switch {
		case r.Change == Unchanged:
			t.Unchanged++
			t.UnchangedBytes += r.ABytes
		case top > 0 && len(t.Rows) == top:
			t.Rest.Rows++
			t.Rest.ABytes += r.ABytes
			t.Rest.BBytes += r.BBytes
			t.Rest.DeltaBytes += r.DeltaBytes
		default:
			t.Rows = append(t.Rows, r)
		}
	}
	return t
}

// newRow is the row of groups ga and gb (either may be nil); it is named
// and placed as B's where B has the group. A name that differs between
// the sides (a renamed file) shows both.
func newRow(key string, ga, gb *group) Row {
	r := Row{Key: key}
	if ga != nil {
		r.Name, r.ABytes, r.ABlocks, r.Place = ga.name, ga.bytes, ga.blocks, ga.place
	}
	if gb != nil {
		if ga != nil && ga.name != gb.name {
			r.Name = ga.name + " -> " + gb.name
		} else {
			r.Name = gb.name
		}
		r.BBytes, r.BBlocks, r.Place = gb.bytes, gb.blocks, gb.place
	}
	r.DeltaBytes = r.BBytes - r.ABytes
	r.Change = changeOf(r.ABytes, r.BBytes)
	return r
}
