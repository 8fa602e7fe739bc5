package breakdown

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/diagnose"
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

// StepPeaks are the allocated peaks inside each of steps, in order.
func StepPeaks(tl *replay.Timeline, steps diagnose.Steps) []At {
	out := make([]At, 0, len(steps.Steps))
	for n, s := range steps.Steps {
		best, bestV := s.First, int64(-1)
		for i := s.First; i < s.End; i++ {
			if v := tl.Value(replay.Allocated, i); v > bestV {
				best, bestV = i, v
			}
		}
		if s.First >= s.End {
			best = s.First - 1
		}
		a := at(tl, fmt.Sprintf("step %d", n+1), best)
		a.Step = n + 1
		out = append(out, a)
	}
	return out
}

// ParseAt resolves a moment as the command line names it: "peak", "end",
// "step N" (also "step=N", "stepN": the allocated peak inside step N of
// steps, 1-based) or an event index.
func ParseAt(tl *replay.Timeline, steps diagnose.Steps, spec string) (At, error) {
	s := strings.ToLower(strings.TrimSpace(spec))
	switch s {
	case "", "peak":
		return Peak(tl), nil
	case "end":
		return End(tl), nil
	}
	if rest, ok := strings.CutPrefix(s, "step"); ok {
		n, err := strconv.Atoi(strings.TrimLeft(rest, " =:#"))
		if err != nil {
			return At{}, fmt.Errorf("--at %q: want step N", spec)
		}
		peaks := StepPeaks(tl, steps)
		if n < 1 || n > len(peaks) {
			return At{}, fmt.Errorf("--at %q: device %d has %d steps (%s)", spec, tl.Device, len(peaks), steps.Reason)
		}
		return peaks[n-1], nil
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return At{}, fmt.Errorf("--at %q: want peak, end, step N or an event index", spec)
	}
	if i < -1 || i >= tl.Len() {
		return At{}, fmt.Errorf("--at %d: device %d has events 0 to %d", i, tl.Device, tl.Len()-1)
	}
	return at(tl, fmt.Sprintf("event %d", i), i), nil
}
