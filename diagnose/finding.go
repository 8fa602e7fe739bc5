// Package diagnose turns a replayed snapshot into findings: why memory
// peaked, how much of it is fragmented and why an allocation failed, each
// blamed on a line of user code. Every analysis is a pure function from the
// snapshot, its timelines and a callsite filter to a typed report (all the
// numbers, for front ends to print) plus Findings (the shared JSON contract).
package diagnose

import "github.com/vramscope/vramscope/snapshot"

// Kind is what a finding is about.
type Kind string

const (
	KindLeak          Kind = "leak"
	KindFragmentation Kind = "fragmentation"
	KindPeak          Kind = "peak"
	KindOOM           Kind = "oom"
)

// Severity ranks findings for display.
type Severity string

const (
	High   Severity = "high"
	Medium Severity = "medium"
	Low    Severity = "low"
)

// Frame is one source location in a finding.
type Frame struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     uint64 `json:"line"`
}

// NewFrame converts a snapshot frame; torch's unknown line (2**64-1)
// becomes 0 so JSON consumers need not know the sentinel.
func NewFrame(f snapshot.Frame) Frame {
	line := f.Line
	if line == snapshot.UnknownLine {
		line = 0
	}
	return Frame{Function: f.Name, File: f.Filename, Line: line}
}

// NewStack converts frames with NewFrame.
func NewStack(fs []snapshot.Frame) []Frame {
	out := make([]Frame, len(fs))
	for i, f := range fs {
		out[i] = NewFrame(f)
	}
	return out
}

// Finding is one diagnosis: what happened, how many bytes, which line of
// code, the numbers behind it and what to do.
type Finding struct {
	Kind     Kind     `json:"kind"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Bytes    int64    `json:"bytes"`
	// BytesPerStep is the growth per iteration (leaks); 0 otherwise.
	BytesPerStep int64 `json:"bytes_per_step"`
	// Callsite is the first user frame; nil when the stack had none (the
	// reason is then in Evidence["callsite_reason"]).
	Callsite *Frame `json:"callsite"`
	// Stack is the short stack of user frames, innermost first.
	Stack []Frame `json:"stack"`
	// Origin is where the memory was allocated when that is below the
	// callsite, in code the user's line called: the innermost Python frame
	// that is not torch (transformers' ForCausalLMLoss under train_step),
	// or, for blocks of the autograd engine's thread, the autograd node
	// (file "during backward"). Absent when the callsite allocated itself.
	Origin *Frame `json:"origin,omitempty"`
	// AllocatedVia are the frames from Origin out to the callsite (not
	// included), innermost first; absent with Origin.
	AllocatedVia []Frame        `json:"allocated_via,omitempty"`
	Evidence     map[string]any `json:"evidence"`
	Fix          string         `json:"fix"`
	Device       int            `json:"device"`
}

// gradeShare is the severity of a finding whose weight is a share of
// memory (of the peak, of reserved bytes): High from high, Medium from
// medium, Low below; and Low whatever the share when the bytes at stake
// are fewer than minSevereBytes.
func gradeShare(share float64, bytes int64, high, medium float64) Severity {
	switch {
	case bytes < minSevereBytes:
		return Low
	case share >= high:
		return High
	case share >= medium:
		return Medium
	}
	return Low
}

// minSevereBytes is the least a peak or fragmentation finding must be
// about to rank above Low: 6 MiB saved on a 12 MiB notebook peak is half
// of it, and still nothing to act on.
const minSevereBytes = 64 << 20
