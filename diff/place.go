package diff

import (
	"path"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/snapshot"
)

// Place is where a callsite row's memory was allocated, as a finding
// names it.
type Place struct {
	// Callsite is the user's line; nil when the stack has none, and Reason
	// says why.
	Callsite *diagnose.Frame `json:"callsite,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	// Origin is the library line below the callsite that allocated, where
	// there is one.
	Origin *diagnose.Frame `json:"origin,omitempty"`
	// AllocatedBy names the backward() call whose autograd engine
	// allocated, for blocks without Python frames.
	AllocatedBy string `json:"allocated_by,omitempty"`
	// Stack is the user frames, innermost first.
	Stack []diagnose.Frame `json:"stack"`
}

// newPlace is the JSON form of pl, whose user frames are stack.
func newPlace(pl diagnose.Place, stack []snapshot.Frame) *Place {
	p := &Place{Stack: diagnose.NewStack(stack)}
	if pl.Site.Known() {
		fr := diagnose.NewFrame(pl.Site.Frame)
		p.Callsite = &fr
	} else {
		p.Reason = pl.Site.String()
	}
	switch {
	case pl.Backward != nil:
		p.AllocatedBy = pl.Backward.String()
	case pl.Origin.Below(pl.Site):
		fr := diagnose.NewFrame(pl.Origin.Frame)
		p.Origin = &fr
	}
	return p
}

// loosePlace is pl with its files dropped as well as its lines: the same
// functions in a renamed file.
func loosePlace(pl diagnose.Place) diagnose.Place {
	pl = groupPlace(pl, false) // copies Backward
	pl.Site.Frame.Filename = ""
	pl.Origin.Frame.Filename = ""
	if pl.Backward != nil {
		pl.Backward.Site.Frame.Filename = ""
	}
	return pl
}

// groupPlace is the place that groups pl: with lines false, every frame's
// line is dropped, so that an edit that moves code does not break the
// match, and so is the autograd node of a block allocated in backward,
// which only stacks="all" names (its row is then the backward() call);
// and each file is named from its installed package on
// (transformers/loss/loss_utils.py) or by its base name (train.py), so
// that two checkouts of one program in different folders match. Its Key
// is the row's key and its String the row's name.
func groupPlace(pl diagnose.Place, lines bool) diagnose.Place {
	fix := func(fr snapshot.Frame) snapshot.Frame {
		if !lines {
			fr.Line = 0
		}
		fr.Filename = shortFile(fr.Filename)
		return fr
	}
	pl.Site.Frame = fix(pl.Site.Frame)
	pl.Origin.Frame = fix(pl.Origin.Frame)
	pl.Origin.Via = nil
	if pl.Backward != nil {
		b := *pl.Backward
		b.Site.Frame = fix(b.Site.Frame)
		if !lines {
			b.Node = ""
		}
		pl.Backward = &b
	}
	return pl
}

// shortFile names a source file without the folders that differ between
// machines: an installed package's file from the package on, another file
// by its base name. The autograd node's pseudo-file and C++ frames' empty
// names stay as they are.
func shortFile(file string) string {
	f := strings.ReplaceAll(file, `\`, "/")
	if f == "" || f == callsite.BackwardFile {
		return file
	}
	if pkg, ok := callsite.PackagePath(f); ok {
		return pkg
	}
	return path.Base(f)
}
