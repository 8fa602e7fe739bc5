package perfetto

import (
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/snapshot"
)

// maxStackFrames bounds a slice's stack summary: enough to reach the
// training loop from an allocation deep in a model, small enough that the
// args panel stays readable.
const maxStackFrames = 16

// stackSummary returns up to maxStackFrames user frames of stack id,
// innermost first (callsite's rules: no allocator, C++, CPython, torch or
// library frames), or the innermost frames of all kinds when none is user
// code, so that a library-only stack still says something.
func (pw *processWriter) stackSummary(id snapshot.StackID) []string {
	frames := pw.filter.UserFrames(pw.sn, id, maxStackFrames)
	out := make([]string, 0, maxStackFrames)
	for _, f := range frames {
		out = append(out, f.String())
	}
	if len(out) > 0 {
		return out
	}
	stack := pw.sn.Stack(id)
	for _, f := range stack[:min(len(stack), maxStackFrames)] {
		out = append(out, pw.sn.Frames[f].String())
	}
	return out
}

// site names the code behind stack id in a slice's title: the user
// function callsite blames, else the innermost library one, else
// "no stack".
func (pw *processWriter) site(id snapshot.StackID) string {
	s := pw.filter.Site(pw.sn, id)
	if s.Depth < 0 {
		return "no stack"
	}
	return s.Frame.Name
}

// newFilter returns opt's callsite filter or the default rules.
func newFilter(opt Options) *callsite.Filter {
	if opt.Filter != nil {
		return opt.Filter
	}
	f, err := callsite.NewFilter("", "")
	if err != nil {
		panic(err) // empty patterns cannot fail to compile
	}
	return f
}
