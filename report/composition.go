package report

import (
	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// compositionPoints is how many moments a composition chart samples: a
// stacked area needs far fewer than the min/max timeline to read.
const compositionPoints = 400

// compositionModules is how many modules get a band of their own; the
// rest share "(other)".
const compositionModules = 10

// Composition is what a device's memory is made of over its trace: the
// allocated bytes by category and by module at each point, for stacked
// areas (package breakdown labels the blocks).
type Composition struct {
	// X is each point's position on the device's Series axis (same
	// unit), Event its trace event (the highest of its bucket).
	X     []int64 `json:"x"`
	Event []int   `json:"event"`
	// ByCategory has a band per category that holds bytes at some point,
	// in the categories' fixed order and colours; ByModule one per
	// module of the largest at the peak, then "(other)".
	ByCategory []Band `json:"by_category"`
	ByModule   []Band `json:"by_module"`
}

// Band is one stacked area: a group's bytes at each point.
type Band struct {
	Name string `json:"name"`
	// Colour is the category's fixed colour; "" for modules (the page
	// colours them as it colours callsites).
	Colour string  `json:"colour,omitempty"`
	Bytes  []int64 `json:"bytes"`
}

// composition labels tl's blocks and samples both stacks.
func (b *Builder) composition(sn *snapshot.Snapshot, tl *replay.Timeline, s Series) *Composition {
	if tl.Len() < 2 {
		return nil
	}
	bd := breakdown.Classify(sn, tl, breakdown.Options{Filter: b.opts.Filter})
	cats := bd.Series(compositionPoints, breakdown.ByCategory, 0)
	mods := bd.Series(compositionPoints, breakdown.ByModule, compositionModules)
	c := &Composition{X: []int64{}, Event: []int{}}
	for _, p := range cats.Points {
		c.X = append(c.X, s.x(tl.Trace, p.Index))
		c.Event = append(c.Event, p.Index)
	}
	c.ByCategory = bands(cats, func(name string, k int) string { return breakdown.Colour(breakdown.Category(name), k) })
	c.ByModule = bands(mods, func(string, int) string { return "" })
	return c
}

// bands turns a series into its non-empty bands, coloured by colour
// (given the band's name and its index among the user's categories).
func bands(s breakdown.Series, colour func(name string, k int) string) []Band {
	out := []Band{}
	user := 0
	for g, name := range s.Names {
		bytes := make([]int64, len(s.Points))
		any := false
		for k, p := range s.Points {
			bytes[k] = p.Bytes[g]
			any = any || bytes[k] != 0
		}
		col := colour(name, user)
		if !breakdown.Category(name).Builtin() {
			user++
		}
		if any {
			out = append(out, Band{Name: name, Colour: col, Bytes: bytes})
		}
	}
	return out
}
