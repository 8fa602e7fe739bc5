package perfetto

import (
	"cmp"
	"slices"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// oomArgs are an OOM instant's args.
type oomArgs struct {
	Requested  uint64   `json:"alloc_bytes"`       // rounded request that failed
	DeviceFree uint64   `json:"device_free_bytes"` // cudaMemGetInfo at the failure
	Stack      []string `json:"stack"`
}

// snapshotArgs are a snapshot() instant's args.
type snapshotArgs struct {
	Active uint64 `json:"active_bytes"`
}

// stageArgs are the args of an annotation without its other half.
type stageArgs struct {
	Stage string `json:"stage"`
}

// instants writes t's OOM and snapshot events, and the annotations of its
// device that pair with nothing, on a "cuda:N events" thread made only if
// there is one.
func (pw *processWriter) instants(t *replay.Timeline, unpaired []snapshot.Annotation) {
	tid := 0
	emit := func(name string, ts int64, args any) {
		if tid == 0 {
			tid = pw.thread(device(t) + " events")
		}
		pw.ew.emit(&event{Name: name, Ph: "i", TS: ts, PID: pw.pid, TID: tid, S: "t", Args: args})
	}
	for i, e := range t.Trace.Others() {
		switch e.Action {
		case snapshot.ActionOOM:
			emit("oom", pw.clk.at(t, i), oomArgs{Requested: e.Size, DeviceFree: e.Addr, Stack: pw.stackSummary(e.Stack)})
		case snapshot.ActionSnapshot:
			emit("snapshot", pw.clk.at(t, i), snapshotArgs{Active: e.Size})
		}
	}
	for _, a := range unpaired {
		emit(a.Name, pw.clk.abs(a.TimeUS), stageArgs{a.Stage})
	}
}

// annotations writes the device's paired record_function annotations as
// complete events on "cuda:N annotations" threads, the longest
// opt.Annotations of them.
func (pw *processWriter) annotations(t *replay.Timeline, pairs []annotationPair) {
	if len(pairs) > pw.opt.Annotations {
		// Equal durations go by start, then name: a total order up to
		// identical ranges, so the choice does not depend on the sort.
		slices.SortFunc(pairs, func(a, b annotationPair) int {
			return cmp.Or(
				cmp.Compare(b.end.TimeUS-b.start.TimeUS, a.end.TimeUS-a.start.TimeUS),
				cmp.Compare(a.start.TimeUS, b.start.TimeUS),
				cmp.Compare(a.start.Name, b.start.Name))
		})
		pw.st.DroppedAnnotations += len(pairs) - pw.opt.Annotations
		pairs = pairs[:pw.opt.Annotations]
	}
	spans := make([]span, 0, len(pairs))
	for _, p := range pairs {
		start, end := pw.clk.abs(p.start.TimeUS), pw.clk.abs(p.end.TimeUS)
		spans = append(spans, span{start, max(start, end), event{Name: p.start.Name, Cat: "annotation", Ph: "X", PID: pw.pid}})
	}
	pw.spans(device(t)+" annotations", spans)
}

// annotationPair is a START and its END.
type annotationPair struct{ start, end snapshot.Annotation }

// pairAnnotations matches device dev's annotations: each END closes the
// latest open START of the same name, as record_function scopes nest.
// What matches nothing is returned in unpaired, in order.
func pairAnnotations(all []snapshot.Annotation, dev int) (pairs []annotationPair, unpaired []snapshot.Annotation) {
	open := map[string][]snapshot.Annotation{}
	for _, a := range all {
		if a.Device != dev {
			continue
		}
		stack := open[a.Name]
		switch {
		case a.Stage == "START":
			open[a.Name] = append(stack, a)
		case a.Stage == "END" && len(stack) > 0:
			pairs = append(pairs, annotationPair{stack[len(stack)-1], a})
			open[a.Name] = stack[:len(stack)-1]
		default:
			unpaired = append(unpaired, a)
		}
	}
	// Left-open STARTs are reported in time order, after the ENDs.
	var left []snapshot.Annotation
	for _, stack := range open {
		left = append(left, stack...)
	}
	slices.SortStableFunc(left, func(a, b snapshot.Annotation) int {
		return cmp.Or(cmp.Compare(a.TimeUS, b.TimeUS), cmp.Compare(a.Name, b.Name))
	})
	return pairs, append(unpaired, left...)
}
