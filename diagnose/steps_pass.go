package diagnose

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/snapshot"
)

// A loop inside one forward pass (for layer in self.layers) repeats as
// regularly as a training loop, but its periods are no steps: a step holds
// the whole repeated body, with what runs once per iteration (the
// embedding, the loss, the optimizer). What tells them apart is the frame
// that runs the loop. The layers' loop runs in a module's forward, which
// also allocates once before the layers (the embedding) and once after them
// (the final norm, the head), at other lines of the same call; a training
// loop runs in the script, outside any module. The memory that piles up
// from layer to layer is the activations autograd keeps for backward, not
// a leak.

// insidePass reports whether the periods of c repeat inside one call of a
// module's forward (or of backward), and says so. The evidence is in the
// Python frames: all the sites that fit the period share a chain of calls
// (their common prefix), and sites outside the period, allocated before
// its first cut and after its last one, branch off that chain at another
// line of the same call. When both sides branch off at or below a module
// frame of the chain, that module call runs once around all the periods.
// Without that evidence (no Python frames, nothing allocated around the
// loop) the periods stand.
func (s *allocSeq) insidePass(sn *snapshot.Snapshot, c period, f *callsite.Filter) (string, bool) {
	var body, bodyFuncs []snapshot.Frame // common prefix, exact and by function
	started := false
	for site, ok := range c.fits {
		if !ok {
			continue
		}
		fs := pyFrames(sn, s.stacks[site])
		if len(fs) == 0 {
			continue
		}
		if !started {
			body, bodyFuncs, started = fs, fs, true
			continue
		}
		body = body[:commonPrefix(body, fs, sameFrame)]
		bodyFuncs = bodyFuncs[:commonPrefix(bodyFuncs, fs, sameFunction)]
	}
	pass := -1 // depth of the outermost module (or autograd) frame
	for d, fr := range bodyFuncs {
		if passFrame(fr) {
			pass = d
			break
		}
	}
	if pass < 0 {
		return "", false
	}
	// The branches off the body's chain before the first cut and after the
	// last; the deepest on each side is the evidence.
	firstCut, lastCut := s.first[c.anchor], s.last[c.anchor]
	var before, after []branch
	for site, ok := range c.fits {
		early, late := s.first[site] < firstCut, s.last[site] > lastCut
		if ok || !early && !late {
			continue
		}
		fs := pyFrames(sn, s.stacks[site])
		d := branchDepth(fs, body, bodyFuncs)
		if d < 0 {
			continue
		}
		if early {
			before = append(before, branch{d, fs})
		}
		if late {
			after = append(after, branch{d, fs})
		}
	}
	h := min(deepest(before), deepest(after))
	if h < pass {
		return "", false
	}
	// The call that holds the loop, and where it allocates around it: the
	// branch of each side that leaves the chain in that call (a deeper one
	// is an allocation of the first or last repeat that does not fit).
	holder := bodyFuncs[h]
	loop := ""
	if h < len(body) {
		loop = fmt.Sprintf(" at line %d", body[h].Line)
	}
	return fmt.Sprintf("one pass, no steps: the %d repeats opened by the allocation at %s run inside one call of %s (%s)%s, "+
		"which also allocates before them (line %d) and after them (line %d): they are the layers of one forward or backward pass, not iterations, "+
		"and what they keep allocated is activations held for backward, not a leak",
		c.n, f.Site(sn, s.stacks[c.anchor]), holder.Name, shortFile(holder.Filename), loop, at(before, h).Line, at(after, h).Line), true
}

// branch is a site outside a period and the depth at which its frames
// leave the chain of calls the period's sites share.
type branch struct {
	depth  int
	frames []snapshot.Frame
}

// deepest is the largest depth of bs; -1 for none.
func deepest(bs []branch) int {
	d := -1
	for _, b := range bs {
		d = max(d, b.depth)
	}
	return d
}

// at is the frame at depth h of the shallowest branch of bs that reaches
// it.
func at(bs []branch, h int) snapshot.Frame {
	best := -1
	for i, b := range bs {
		if b.depth >= h && (best < 0 || b.depth < bs[best].depth) {
			best = i
		}
	}
	return bs[best].frames[h]
}

// branchDepth is the depth at which frames fs leave the chain of calls
// shared by the period's sites: the last depth whose function both run
// (body is the exact common prefix, funcs the common prefix by function);
// -1 when fs shares none of it.
func branchDepth(fs, body, funcs []snapshot.Frame) int {
	j := commonPrefix(body, fs, sameFrame)
	if j < len(fs) && j < len(funcs) && sameFunction(fs[j], funcs[j]) {
		return j
	}
	return j - 1
}

// pyFrames returns the Python frames of stack id, outermost first. A stack
// recorded with stacks="all" interleaves C++ frames, which say nothing of
// the program's loops.
func pyFrames(sn *snapshot.Snapshot, id snapshot.StackID) []snapshot.Frame {
	ids := sn.Stack(id)
	out := make([]snapshot.Frame, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		if fr := sn.Frames[ids[i]]; strings.HasSuffix(fr.Filename, ".py") {
			out = append(out, fr)
		}
	}
	return out
}

// passFrame reports whether fr runs one pass of a model: a module's call
// or forward, autograd's backward, or activation checkpointing.
func passFrame(fr snapshot.Frame) bool {
	file := strings.ReplaceAll(fr.Filename, `\`, "/")
	return fr.Name == "forward" ||
		strings.HasSuffix(file, "torch/nn/modules/module.py") ||
		strings.Contains(file, "torch/autograd/") ||
		strings.HasSuffix(file, "torch/utils/checkpoint.py")
}

func sameFrame(a, b snapshot.Frame) bool { return a == b }

func sameFunction(a, b snapshot.Frame) bool { return a.Name == b.Name && a.Filename == b.Filename }

// commonPrefix is the length of the longest prefix of a and b whose frames
// are equal under eq.
func commonPrefix(a, b []snapshot.Frame, eq func(a, b snapshot.Frame) bool) int {
	n := 0
	for n < len(a) && n < len(b) && eq(a[n], b[n]) {
		n++
	}
	return n
}

// shortFile is a file name for a sentence: its last two path elements.
func shortFile(name string) string {
	name = strings.ReplaceAll(name, `\`, "/")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		if j := strings.LastIndex(name[:i], "/"); j >= 0 {
			return name[j+1:]
		}
	}
	return name
}
