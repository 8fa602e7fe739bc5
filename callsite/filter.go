// Package callsite names the line of user code behind a stack: the first
// frame, innermost first, that is not allocator, C++, CPython, torch or
// third-party library code. Findings quote that frame; a stack with no such
// frame gets a Reason instead, because "unknown" alone tells a person nothing.
//
// An allocation of the backward pass recorded with stacks="all" has only
// C++ frames; the autograd node that made it (DivBackward0) is then its
// callsite, as a frame whose file is BackwardFile, so that everything
// above prints and groups it like any other line.
package callsite

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/vramscope/vramscope/snapshot"
)

// Reasons given for stacks that have no user frame.
const (
	ReasonNoStack    = "no stack recorded (context=None or an action without frames)"
	ReasonEmptyStack = `empty stack (allocated before recording started, or by the autograd thread with stacks="python")`
	// ReasonEmptyStackAll is ReasonEmptyStack in a snapshot recorded with
	// stacks="all", whose backward allocations have C++ stacks: only the
	// first half can apply.
	ReasonEmptyStackAll = "empty stack (allocated before recording started)"
	ReasonLibraryOnly   = "only library frames"
)

// Memoized per-frame classes.
const (
	frameUnknown uint8 = iota
	frameUser
	frameSkipped
	frameNode    // an autograd node's apply: user-facing when the engine runs it
	frameEngine  // the autograd engine evaluating a node
	frameCapture // stack capture, allocator or thread start: never worth showing
)

// Filter decides which frames are user code. It is safe for concurrent use;
// it memoizes per-frame decisions for the snapshot it last saw, since
// millions of allocations share a few thousand frames.
type Filter struct {
	focus, ignore *regexp.Regexp

	mu     sync.Mutex
	sn     *snapshot.Snapshot
	frames []uint8 // per FrameID: a frame class
	// emptyStack is the reason an empty stack of sn gets.
	emptyStack string
}

// NewFilter builds a filter. focus is a regexp: frames whose filename or
// function match are user code even when a default rule would skip them
// (say, to blame a transformers module). ignore is a regexp of further
// frames to skip (say, your own wrappers); it wins over focus. Empty strings
// keep the defaults.
func NewFilter(focus, ignore string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.focus, err = compile("focus", focus); err != nil {
		return nil, err
	}
	if f.ignore, err = compile("ignore", ignore); err != nil {
		return nil, err
	}
	return f, nil
}

func compile(what, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("callsite %s pattern %q: %w", what, expr, err)
	}
	return re, nil
}

// User reports whether fr counts as user code under f's rules.
func (f *Filter) User(fr snapshot.Frame) bool {
	if f.ignore != nil && (f.ignore.MatchString(fr.Filename) || f.ignore.MatchString(fr.Name)) {
		return false
	}
	if f.focus != nil && (f.focus.MatchString(fr.Filename) || f.focus.MatchString(fr.Name)) {
		return true
	}
	return !Library(fr)
}

// class is the class of frame id of sn, memoized. The caller holds f.mu.
func (f *Filter) class(sn *snapshot.Snapshot, id snapshot.FrameID) uint8 {
	f.see(sn)
	if c := f.frames[id]; c != frameUnknown {
		return c
	}
	fr := sn.Frames[id]
	c := frameSkipped
	switch {
	case f.User(fr):
		c = frameUser
	case f.ignore != nil && f.ignore.MatchString(fr.Name):
	case nodeName(fr) != "":
		c = frameNode
	case engineFrame(fr):
		c = frameEngine
	case capture(fr):
		c = frameCapture
	}
	f.frames[id] = c
	return c
}

// see resets the memo for sn when it is not the snapshot last seen. The
// caller holds f.mu.
func (f *Filter) see(sn *snapshot.Snapshot) {
	if f.sn == sn {
		return
	}
	f.sn, f.frames = sn, make([]uint8, len(sn.Frames))
	f.emptyStack = ReasonEmptyStack
	// stacks="all" puts the stack capture's own frames in every stack.
	if slices.ContainsFunc(sn.Frames, func(fr snapshot.Frame) bool { return strings.HasPrefix(fr.Name, "torch::CapturedTraceback::gather") }) {
		f.emptyStack = ReasonEmptyStackAll
	}
}

// placed walks stack innermost first and calls yield with each frame a
// person can look at: user frames, and the autograd nodes that the
// backward engine runs (as BackwardFile frames). It stops when yield
// returns false. The caller holds f.mu.
func (f *Filter) placed(sn *snapshot.Snapshot, stack []snapshot.FrameID, yield func(depth int, fr snapshot.Frame) bool) {
	engine := -1 // the outermost engine frame: nodes inside it run in backward
	for i := len(stack) - 1; i >= 0; i-- {
		if f.class(sn, stack[i]) == frameEngine {
			engine = i
			break
		}
	}
	for i, fid := range stack {
		fr := sn.Frames[fid]
		switch f.class(sn, fid) {
		case frameUser:
		case frameNode:
			if i > engine {
				continue
			}
			fr = snapshot.Frame{Name: nodeName(fr), Filename: BackwardFile}
		default:
			continue
		}
		if !yield(i, fr) {
			return
		}
	}
}

// Site returns the callsite of stack id.
func (f *Filter) Site(sn *snapshot.Snapshot, id snapshot.StackID) Site {
	if id == snapshot.NoStack {
		return Site{Depth: -1, Reason: ReasonNoStack}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stack := sn.Stack(id)
	if len(stack) == 0 {
		f.see(sn)
		return Site{Depth: -1, Reason: f.emptyStack}
	}
	site := Site{Depth: -1}
	f.placed(sn, stack, func(depth int, fr snapshot.Frame) bool {
		site.Frame, site.Depth = fr, depth
		return false
	})
	if site.Depth >= 0 {
		return site
	}
	// Keep the innermost Python frame (the library call the user made
	// through); in C++ frames alone, the operator that allocated, else the
	// innermost frame that is not the stack capture or the allocator, which
	// every stack starts with, else the outermost.
	keep := slices.IndexFunc(stack, func(fid snapshot.FrameID) bool { return !native(sn.Frames[fid]) })
	if keep < 0 {
		keep = slices.IndexFunc(stack, func(fid snapshot.FrameID) bool { return opCall.MatchString(sn.Frames[fid].Name) })
	}
	if keep < 0 {
		keep = slices.IndexFunc(stack, func(fid snapshot.FrameID) bool { return f.class(sn, fid) != frameCapture })
	}
	if keep < 0 {
		keep = len(stack) - 1
	}
	return Site{Frame: sn.Frames[stack[keep]], Depth: keep, Reason: ReasonLibraryOnly}
}

// UserFrames returns up to max user frames of stack id, innermost first
// (all of them when max <= 0): the short stack a finding prints. An
// autograd node run in backward counts as one, as in Site.
func (f *Filter) UserFrames(sn *snapshot.Snapshot, id snapshot.StackID, max int) []snapshot.Frame {
	if id == snapshot.NoStack {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []snapshot.Frame
	f.placed(sn, sn.Stack(id), func(_ int, fr snapshot.Frame) bool {
		out = append(out, fr)
		return max <= 0 || len(out) < max
	})
	return out
}

// Site is the user frame blamed for a stack.
type Site struct {
	Frame snapshot.Frame
	Depth int // index of Frame in the stack; -1 if none
	// Reason is non-empty when the stack has no user frame: why. With
	// ReasonLibraryOnly, Frame is the innermost library frame.
	Reason string
}

// Known reports whether a user frame was found.
func (s Site) Known() bool { return s.Reason == "" }

func (s Site) String() string {
	switch {
	case s.Known():
		return s.Frame.String()
	case s.Depth >= 0:
		return fmt.Sprintf("%s, innermost %s", s.Reason, s.Frame)
	}
	return s.Reason
}

// Key is a comparable grouping key: sites with equal keys are the same line
// of code (or the same reason).
func (s Site) Key() string {
	if s.Known() {
		return s.Frame.Filename + ":" + fmt.Sprint(s.Frame.Line) + ":" + s.Frame.Name
	}
	return s.Reason + "|" + s.Frame.Filename + ":" + fmt.Sprint(s.Frame.Line) + ":" + s.Frame.Name
}

// native reports whether fr is a C/C++ frame (torch records them with
// stacks="all"): no Python file to point a person at.
func native(fr snapshot.Frame) bool {
	fn := fr.Filename
	if fn == "" || fn == "??" || fr.Line == 0 {
		return true
	}
	for _, ext := range nativeExts {
		if strings.HasSuffix(fn, ext) {
			return true
		}
	}
	return strings.HasSuffix(fn, ".so") || strings.Contains(fn, ".so.")
}

var nativeExts = []string{".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh"}
