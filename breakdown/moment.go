package breakdown

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/parallel"
	"github.com/vramscope/vramscope/replay"
)

// At is a moment of a timeline that a table is taken at.
type At struct {
	// Label names it: "peak", "end", "step 3" (the allocated peak inside
	// the trace's third step), "event 1234".
	Label string `json:"label"`
	// Event is the trace event right after which the blocks are counted;
	// -1 (replay.BeforeRecording) is the start of the trace.
	Event  int   `json:"event"`
	TimeUS int64 `json:"time_us"`
	// Step is the step's number (1-based) for a step moment, else 0.
	Step int `json:"step,omitempty"`
}

// Peak is the allocated peak of tl.
func Peak(tl *replay.Timeline) At {
	p := tl.Peak(replay.Allocated)
	return At{Label: "peak", Event: p.Index, TimeUS: p.TimeUS}
}

// End is right after tl's last event.
func End(tl *replay.Timeline) At {
	i := tl.Len() - 1
	return at(tl, "end", i)
}

func at(tl *replay.Timeline, label string, i int) At {
	a := At{Label: label, Event: i}
	if i >= 0 && i < tl.Len() {
		a.TimeUS = tl.Trace.At(i).TimeUS
	}
	return a
}

// peakAt is the first of events lo..hi-1 (lo < hi) where the allocated
// bytes are highest, or lo if they are all negative (only a damaged trace
// has such).
func peakAt(tl *replay.Timeline, lo, hi int) int {
	if i, v := tl.PeakIn(replay.Allocated, lo, hi); v >= 0 {
		return i
	}
	return lo
}

// StepPeaks are the allocated peaks inside each of steps, in order,
// found in ranges of the steps on every core (a range holds at least
// rangeLen/64 steps: a step is tens to thousands of events).
func StepPeaks(tl *replay.Timeline, steps diagnose.Steps) []At {
	out := make([]At, len(steps.Steps))
	parallel.Do(parallel.Ranges(len(out), rangeLen/64), func(_, lo, hi int) {
		for n := lo; n < hi; n++ {
			s := steps.Steps[n]
			best := s.First - 1 // a step without events
			if s.First < s.End {
				best = peakAt(tl, s.First, s.End)
			}
			out[n] = at(tl, fmt.Sprintf("step %d", n+1), best)
			out[n].Step = n + 1
		}
	})
	return out
}

// atSpec is a parsed --at: peak, end, a step or an event.
type atSpec struct {
	kind string // "peak", "end", "step", "event"
	n    int
}

// parseSpec reads spec's form, whatever the timeline.
func parseSpec(spec string) (atSpec, error) {
	s := strings.ToLower(strings.TrimSpace(spec))
	switch s {
	case "", "peak":
		return atSpec{kind: "peak"}, nil
	case "end":
		return atSpec{kind: "end"}, nil
	}
	if rest, ok := strings.CutPrefix(s, "step"); ok {
		n, err := strconv.Atoi(strings.TrimLeft(rest, " =:#"))
		if err != nil || n < 1 {
			return atSpec{}, fmt.Errorf("--at %q: want step N, N from 1", spec)
		}
		return atSpec{kind: "step", n: n}, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < -1 {
		return atSpec{}, fmt.Errorf("--at %q: want peak, end, step N or an event index", spec)
	}
	return atSpec{kind: "event", n: i}, nil
}

// CheckAt reports whether spec is a moment ParseAt can resolve on some
// timeline: a command checks it before reading any file.
func CheckAt(spec string) error {
	_, err := parseSpec(spec)
	return err
}

// NeedsSteps reports whether spec names a step, which needs the trace's
// steps to resolve.
func NeedsSteps(spec string) bool {
	s, err := parseSpec(spec)
	return err == nil && s.kind == "step"
}

// ParseAt resolves a moment as the command line names it: "peak", "end",
// "step N" (also "step=N", "stepN": the allocated peak inside step N of
// steps, 1-based) or an event index (-1: before the first event).
func ParseAt(tl *replay.Timeline, steps diagnose.Steps, spec string) (At, error) {
	s, err := parseSpec(spec)
	if err != nil {
		return At{}, err
	}
	switch s.kind {
	case "peak":
		return Peak(tl), nil
	case "end":
		return End(tl), nil
	case "step":
		peaks := StepPeaks(tl, steps)
		if s.n > len(peaks) {
			return At{}, fmt.Errorf("--at %q: device %d has %d steps (%s)", spec, tl.Device, len(peaks), steps.Reason)
		}
		return peaks[s.n-1], nil
	}
	if s.n >= tl.Len() {
		return At{}, fmt.Errorf("--at %d: device %d has events 0 to %d", s.n, tl.Device, tl.Len()-1)
	}
	return at(tl, fmt.Sprintf("event %d", s.n), s.n), nil
}
