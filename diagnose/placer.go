package diagnose

import (
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Placer names the places of one timeline's blocks as the findings do,
// the autograd engine's blocks at the user's backward() call included, for
// packages that group live memory by place (diff). It is not safe for
// concurrent use: it memoizes per stack.
type Placer struct{ p *placer }

// NewPlacer returns a Placer for the blocks of tl, a timeline of sn.
func NewPlacer(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter) *Placer {
	return &Placer{newPlacer(sn, tl, f)}
}

// Allocation is the place of allocation k (an index for tl.Allocation).
func (p *Placer) Allocation(k int) Place { return p.p.alloc(k) }

// Frames are the user frames of pl, innermost first, as a finding's stack
// shows them.
func (p *Placer) Frames(pl Place) []snapshot.Frame { return p.p.frames(pl) }
