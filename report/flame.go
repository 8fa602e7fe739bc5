package report

import (
	"fmt"

	"cmp"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
	"slices"
)

// flameTree is a flame graph under construction.
type flameTree struct {
	name     string
	value    int64
	children map[string]*flameTree
}

func (t *flameTree) child(name string) *flameTree {
	c := t.children[name]
	if c == nil {
		c = &flameTree{name: name, children: map[string]*flameTree{}}
		t.children[name] = c
	}
	return c
}

// flame builds the flame graph of samples. Frames under FlameMin of the
// total are dropped (their bytes stay in the parent's width), which
// bounds the payload whatever the number of stacks.
func (b *Builder) flame(label string, samples []sample) Flame {
	root := &flameTree{name: "all", children: map[string]*flameTree{}}
	for _, s := range samples {
		root.value += s.bytes
		n := root
		for _, f := range s.frames {
			n = n.child(f)
			n.value += s.bytes
		}
	}
	minValue := int64(float64(root.value) * b.opts.FlameMin)
	return Flame{Label: label, Root: root.node(max(minValue, 1))}
}

// node converts t, children largest first, dropping those under minValue.
func (t *flameTree) node(minValue int64) FlameNode {
	n := FlameNode{Name: t.name, Value: t.value, Children: []FlameNode{}}
	for _, c := range t.children {
		if c.value >= minValue {
			n.Children = append(n.Children, c.node(minValue))
		}
	}
	slices.SortFunc(n.Children, func(a, b FlameNode) int {
		if c := cmp.Compare(b.Value, a.Value); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return n
}

// FlameAt is the flame graph of the blocks active right after event i of
// tl (replay.BeforeRecording: before the first event).
func (b *Builder) FlameAt(sn *snapshot.Snapshot, tl *replay.Timeline, i int) Flame {
	return b.flame(fmt.Sprintf("live after event %d", i), b.samplesAt(sn, tl, i))
}
