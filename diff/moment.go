package diff

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// MomentKind is where on each side's timeline the two are compared.
type MomentKind uint8

const (
	// Peak is the event at which allocated memory is highest.
	Peak MomentKind = iota
	// End is the last event: what was live when the snapshot was dumped.
	End
	// Step is the last event of step N.
	Step
)

// Moment is the moment --at names: the peak, the end, or step N.
type Moment struct {
	Kind MomentKind
	Step int // with Kind Step
}

func (m Moment) String() string {
	switch m.Kind {
	case End:
		return "end"
	case Step:
		return fmt.Sprintf("step %d", m.Step)
	}
	return "peak"
}

// ParseMoment reads "peak", "end", "step N" or "stepN".
func ParseMoment(s string) (Moment, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "peak", "":
		return Moment{Kind: Peak}, nil
	case "end":
		return Moment{Kind: End}, nil
	}
	if n, ok := strings.CutPrefix(t, "step"); ok {
		if k, err := strconv.Atoi(strings.TrimLeft(n, " _=")); err == nil && k >= 0 {
			return Moment{Kind: Step, Step: k}, nil
		}
	}
	return Moment{}, fmt.Errorf("--at %q: want peak, end or step N", s)
}

// Point is one side's moment on one device: the event and what it is.
type Point struct {
	// Event is the trace index the blocks are taken right after;
	// replay.BeforeRecording (-1) for a snapshot without a trace, whose
	// only moment is the dump.
	Event int `json:"event"`
	// TimeUS is the event's time (Unix epoch microseconds; 0 without one).
	TimeUS int64 `json:"time_us"`
	// Label says which moment it is: "peak", "end", "end of step 3
	// (train_step#3)", "end of step 3 (the step3 dump)".
	Label string `json:"label"`
}

// locate finds moment m on tl. fileStep is the step whose end the
// snapshot was dumped at, when its name says so (step3/…pickle): step N
// of such a snapshot is its end.
func locate(sn *snapshot.Snapshot, tl *replay.Timeline, f *callsite.Filter, m Moment, fileStep *int) (Point, error) {
	last := tl.Len() - 1 // BeforeRecording when there is no trace
	point := func(i int, label string) Point {
		p := Point{Event: i, Label: label}
		if i >= 0 {
			p.TimeUS = tl.Trace.At(i).TimeUS
		}
		return p
	}
	switch m.Kind {
	case Peak:
		if last < 0 {
			return point(last, "end (no trace: the dump)"), nil
		}
		return point(tl.Peak(replay.Allocated).Index, "peak"), nil
	case End:
		return point(last, "end"), nil
	}
	if fileStep != nil && *fileStep == m.Step {
		return point(last, fmt.Sprintf("end of step %d (the dump)", m.Step)), nil
	}
	steps := diagnose.DetectSteps(sn, tl, f)
	if len(steps.Steps) == 0 {
		return Point{}, fmt.Errorf("device %d: no step %d: %s", tl.Device, m.Step, steps.Reason)
	}
	k := slices.IndexFunc(steps.Steps, func(s diagnose.Step) bool { return labelNumber(s.Label) == m.Step })
	if k < 0 {
		labels := make([]string, 0, len(steps.Steps))
		for _, s := range steps.Steps {
			labels = append(labels, s.Label)
		}
		return Point{}, fmt.Errorf("device %d: no step %d among the trace's %d steps (%s)", tl.Device, m.Step, len(labels), strings.Join(labels, ", "))
	}
	s := steps.Steps[k]
	return point(s.End-1, fmt.Sprintf("end of step %d (%s)", m.Step, s.Label)), nil
}

// lastNumber is the last integer in a step's label: 3 in "train_step#3",
// "step=3", "Optimizer.step#Adam.step (3)" and "period 3".
var lastNumber = regexp.MustCompile(`(\d+)\D*$`)

// labelNumber is the step number a label carries, or -1.
func labelNumber(label string) int {
	m := lastNumber.FindStringSubmatch(label)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}
