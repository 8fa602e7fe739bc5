package callsite

import (
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// Origin is where inside the program a stack's memory was allocated: the
// innermost Python frame that is not torch itself, which is often library
// code (transformers' ForCausalLMLoss upcasting the logits) far below the
// user's line that the Site names. Via are the frames from the origin out
// to the callsite, innermost first: the path the allocation took.
type Origin struct {
	Frame snapshot.Frame
	Depth int // index of Frame in the stack; meaningless unless Known
	Via   []snapshot.Frame
}

// maxVia is how many frames an Origin keeps on its way to the callsite:
// the origin and the few library calls above it, not a whole model's stack.
const maxVia = 4

// Known reports whether the stack had a Python frame outside torch (the
// zero Origin has none).
func (o Origin) Known() bool { return o.Frame != snapshot.Frame{} }

// Below reports whether the origin lies under site, in other code than the
// site's own line: only then does it add a place to the callsite.
func (o Origin) Below(site Site) bool {
	return o.Known() && (!site.Known() || o.Depth < site.Depth)
}

// Key is a comparable grouping key: equal keys are the same line of code.
func (o Origin) Key() string {
	if !o.Known() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%s", o.Frame.Filename, o.Frame.Line, o.Frame.Name)
}

// String names the origin's frame with an installed package's file from
// the package on: "ForCausalLMLoss (transformers/loss/loss_utils.py:59)".
func (o Origin) String() string {
	fr := o.Frame
	if pkg, ok := PackagePath(strings.ReplaceAll(fr.Filename, `\`, "/")); ok {
		fr.Filename = pkg
	}
	return fr.String()
}

// Origin returns where stack id was allocated. With focus or ignore, a
// frame the filter ignores is never an origin, and a frame it focuses on
// always can be.
func (f *Filter) Origin(sn *snapshot.Snapshot, id snapshot.StackID) Origin {
	o := Origin{Depth: -1}
	if id == snapshot.NoStack {
		return o
	}
	stack := sn.Stack(id)
	site := f.Site(sn, id)
	for i, fid := range stack {
		fr := sn.Frames[fid]
		if !f.origin(fr) {
			continue
		}
		if !o.Known() {
			o.Frame, o.Depth = fr, i
		}
		if site.Known() && i >= site.Depth || len(o.Via) == maxVia {
			break
		}
		o.Via = append(o.Via, fr)
	}
	return o
}

// origin reports whether fr can be an origin: Python code that is not torch,
// the interpreter or the standard library.
func (f *Filter) origin(fr snapshot.Frame) bool {
	if f.ignore != nil && (f.ignore.MatchString(fr.Filename) || f.ignore.MatchString(fr.Name)) {
		return false
	}
	if f.focus != nil && (f.focus.MatchString(fr.Filename) || f.focus.MatchString(fr.Name)) {
		return true
	}
	if native(fr) || fr.Name == "_start" {
		return false
	}
	for _, p := range torchNameParts {
		if strings.Contains(fr.Name, p) {
			return false
		}
	}
	file := strings.ReplaceAll(fr.Filename, `\`, "/")
	for _, p := range torchFileParts {
		if strings.Contains(file, p) {
			return false
		}
	}
	if strings.Contains(file, "<frozen ") {
		return false
	}
	// An installed package lives under the standard library's folder
	// (/usr/lib/python3.12/site-packages/transformers/...) without being
	// part of it, and is torch only when the package is: a venv may sit in
	// /opt/torch/.venv.
	if pkg, ok := PackagePath(file); ok {
		return !strings.HasPrefix(pkg, "torch/")
	}
	return !strings.Contains(file, "/torch/") && !stdlibFile.MatchString(file)
}

// PackagePath returns an installed package's file from the package on
// (transformers/loss/loss_utils.py), and whether file is in one.
func PackagePath(file string) (string, bool) {
	for _, dir := range []string{"/site-packages/", "/dist-packages/"} {
		if i := strings.LastIndex(file, dir); i >= 0 {
			return file[i+len(dir):], true
		}
	}
	return "", false
}
