package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// numberedFamily returns the family of a record_function name that ends in
// a number ("ProfilerStep#12", "train_step#3"): the name with the number
// replaced by N. Names of digits only, and names with a line break before
// their last character, have none, as with the expression
// ^(.*[^0-9])([0-9]+)$ that this replaces: matching it on every range took
// 40 ms of a trace with 11 k steps.
func numberedFamily(name string) (string, bool) {
	stem := strings.TrimRight(name, "0123456789")
	if stem == "" || len(stem) == len(name) || strings.Contains(stem[:len(stem)-1], "\n") {
		return "", false
	}
	return stem + "N", true
}

// Names of the markers torch itself writes.
const (
	profilerStepFamily = "ProfilerStep#N"
	optimizerStep      = "Optimizer.step#"
	// compiledRegion ranges are torch.compile's, numbered by frame and
	// compile id, not by iteration.
	compiledRegion = "Torch-Compiled Region"
)

// annRange is one START/END pair of an annotation name.
type annRange struct {
	name           string
	startUS, endUS int64
}

// stepsFromAnnotations finds steps in record_function ranges. The best
// signal is a numbered family ("ProfilerStep#N" first, then the user's own
// "name#N" covering the most events): each range is a step. Failing that,
// each Optimizer.step range ends a step (a training iteration ends with its
// optimizer step). It reports false when neither exists.
func stepsFromAnnotations(anns []snapshot.Annotation, device int, tr snapshot.Trace) (Steps, bool) {
	ranges, unpaired := pairAnnotations(deviceAnnotations(anns, device))
	var s Steps
	var ok bool
	if s, ok = numberedSteps(ranges, tr); !ok {
		if s, ok = optimizerSteps(ranges, tr); !ok {
			return Steps{}, false
		}
	}
	if unpaired > 0 {
		s.Reason += fmt.Sprintf("; %d START or END annotations had no partner (annotations share the trace's max_entries cap, or a dump happened inside a range) and were skipped", unpaired)
	}
	return s, true
}

// deviceAnnotations returns the annotations recorded for device, or all of
// them when none names it, in time order: annotations come from the
// recording thread's current device, which is device 0 for threads that
// never set one (pytorch/pytorch#130457). The result may be anns itself,
// when that is already the answer (one device, recorded in time order):
// a long trace has hundreds of thousands of annotations, and copying them
// made 16 MB of garbage on the 996 MB bench file.
func deviceAnnotations(anns []snapshot.Annotation, device int) []snapshot.Annotation {
	byTime := func(a, b snapshot.Annotation) int { return cmp.Compare(a.TimeUS, b.TimeUS) }
	n := 0
	for _, a := range anns {
		if a.Device == device {
			n++
		}
	}
	all := n == 0 || n == len(anns)
	if all && slices.IsSortedFunc(anns, byTime) {
		return anns
	}
	if all {
		n = len(anns)
	}
	out := make([]snapshot.Annotation, 0, n)
	for _, a := range anns {
		if all || a.Device == device {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, byTime)
	return out
}

// pairAnnotations matches each END with the latest open START of the same
// name, which is right for nested ranges of one name too. It returns the
// ranges in order of their START and the number of annotations left
// without a partner.
func pairAnnotations(anns []snapshot.Annotation) (ranges []annRange, unpaired int) {
	open := map[string][]int64{}
	ranges = make([]annRange, 0, len(anns)/2) // nearly all are paired
	for _, a := range anns {
		switch a.Stage {
		case "START":
			open[a.Name] = append(open[a.Name], a.TimeUS)
		case "END":
			st := open[a.Name]
			if len(st) == 0 {
				unpaired++
				continue
			}
			ranges = append(ranges, annRange{name: a.Name, startUS: st[len(st)-1], endUS: a.TimeUS})
			open[a.Name] = st[:len(st)-1]
		}
	}
	for _, st := range open {
		unpaired += len(st)
	}
	slices.SortStableFunc(ranges, func(a, b annRange) int { return cmp.Compare(a.startUS, b.startUS) })
	return ranges, unpaired
}

// numberedSteps picks the numbered family that best describes iterations
// and makes one step per range. A family qualifies with at least two ranges
// that do not overlap (nested or concurrent ranges are not iterations).
func numberedSteps(ranges []annRange, tr snapshot.Trace) (Steps, bool) {
	families := map[string][]annRange{}
	for _, r := range ranges {
		if strings.HasPrefix(r.name, compiledRegion) {
			continue
		}
		if fam, ok := numberedFamily(r.name); ok {
			families[fam] = append(families[fam], r)
		}
	}
	best, bestEvents := "", -1
	var bestSteps []Step
	for fam, rs := range families {
		if !sequential(rs) {
			continue
		}
		// Each family's steps are made while it is scored, so that no
		// range's events are searched for twice.
		steps := make([]Step, len(rs))
		events, from := 0, 0
		for k, r := range rs {
			first, end := eventSpan(tr, from, r.startUS, r.endUS)
			from = first
			steps[k] = Step{Label: r.name, Source: SourceAnnotation, First: first, End: end, StartUS: r.startUS, EndUS: r.endUS}
			events += end - first
		}
		// The family covering the most events is the outermost loop
		// ("train_step#N" over a nested "microbatch#N"); on a tie, the one
		// with fewer, longer ranges is, then the name decides.
		better := events > bestEvents
		if events == bestEvents {
			n, bn := len(rs), len(families[best])
			better = n < bn || n == bn && fam < best
		}
		if fam == profilerStepFamily || best != profilerStepFamily && better {
			best, bestEvents, bestSteps = fam, events, steps
		}
	}
	if best == "" {
		return Steps{}, false
	}
	return Steps{
		Steps: bestSteps, Source: SourceAnnotation, Marker: best, Confidence: 1,
		Reason: fmt.Sprintf("%d %s record_function ranges", len(bestSteps), best),
	}, true
}

// sequential reports whether rs (in START order) has two or more ranges,
// each ending before the next starts.
func sequential(rs []annRange) bool {
	if len(rs) < 2 {
		return false
	}
	for k := 1; k < len(rs); k++ {
		if rs[k].startUS < rs[k-1].endUS {
			return false
		}
	}
	return true
}

// optimizerSteps ends a step at the END of every Optimizer.step range
// ("Optimizer.step#Adam.step"), of the optimizer stepped most often when
// there are several. The first step starts at the first event; events after
// the last optimizer step belong to no step.
func optimizerSteps(ranges []annRange, tr snapshot.Trace) (Steps, bool) {
	byName := map[string][]annRange{}
	for _, r := range ranges {
		if strings.HasPrefix(r.name, optimizerStep) {
			byName[r.name] = append(byName[r.name], r)
		}
	}
	best := ""
	for name, rs := range byName {
		if best == "" || len(rs) > len(byName[best]) || len(rs) == len(byName[best]) && name < best {
			best = name
		}
	}
	if best == "" {
		return Steps{}, false
	}
	rs := byName[best]
	steps := make([]Step, 0, len(rs))
	first, startUS := 0, tr.At(0).TimeUS
	from := 0 // the events of the last range start here
	for k, r := range rs {
		rangeFirst, end := eventSpan(tr, from, r.startUS, r.endUS)
		from = rangeFirst
		end = max(end, first)
		steps = append(steps, Step{
			// Not Sprintf: a long run has hundreds of thousands of steps.
			Label: best + " (" + strconv.Itoa(k+1) + ")", Source: SourceAnnotation,
			First: first, End: end, StartUS: startUS, EndUS: r.endUS,
		})
		first, startUS = end, r.endUS
	}
	return Steps{
		Steps: steps, Source: SourceAnnotation, Marker: best, Confidence: 1,
		Reason: fmt.Sprintf("%d %s ranges, each ending a step", len(steps), best),
	}, true
}
