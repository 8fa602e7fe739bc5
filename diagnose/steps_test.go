package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// scriptTrace builds a one-device snapshot event by event. Events are 10
// µs apart; an annotation takes the time between two events, so a range
// opened before an event and closed after it contains it.
type scriptTrace struct {
	sn       *snapshot.Snapshot
	events   []snapshot.Event
	contexts []snapshot.Context
	now      int64
	md       snapshot.StringID
	next     uint64 // next free address: blocks are never reused
}

func newScriptTrace() *scriptTrace {
	return &scriptTrace{sn: snapshot.New(), now: 1_000_000, next: 0x7f0000000000}
}

// alloc allocates size bytes from function fn (one user frame at line 1 of
// train.py) and returns the block's address.
func (s *scriptTrace) alloc(fn string, size uint64) uint64 {
	return s.allocStack(size, snapshot.Frame{Name: fn, Filename: "/home/u/train.py", Line: 1})
}

// allocStack allocates size bytes from a stack of frames given outermost
// first, as a program calls them, and returns the block's address.
func (s *scriptTrace) allocStack(size uint64, frames ...snapshot.Frame) uint64 {
	addr := s.next
	s.next += replay.RoundSize(size)
	ids := make([]snapshot.FrameID, len(frames))
	for i, fr := range frames {
		ids[len(frames)-1-i] = s.sn.InternFrame(fr) // stacks are innermost first
	}
	s.push(snapshot.Event{Action: snapshot.ActionAlloc, Addr: addr, Size: size, Stack: s.sn.InternStack(ids)})
	return addr
}

func (s *scriptTrace) free(addr, size uint64) {
	s.push(snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: addr, Size: size})
	s.push(snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: addr, Size: size})
}

// metadata sets the user_metadata of the events that follow.
func (s *scriptTrace) metadata(md string) { s.md = s.sn.InternString(md) }

func (s *scriptTrace) annotate(stage, name string) {
	s.sn.Annotations = append(s.sn.Annotations, snapshot.Annotation{Name: name, Stage: stage, TimeUS: s.now + 5})
}

func (s *scriptTrace) push(e snapshot.Event) {
	s.now += 10
	e.TimeUS = s.now
	s.events = append(s.events, e)
	s.contexts = append(s.contexts, snapshot.Context{UserMetadata: s.md})
}

func (s *scriptTrace) build() *snapshot.Snapshot {
	s.sn.Traces = []snapshot.Trace{snapshot.NewTrace(s.events, s.contexts)}
	return s.sn
}

// iteration allocates and frees a transient activation, with keep bytes
// (0 for none) allocated in between that stay allocated: 3 events, or 4.
func (s *scriptTrace) iteration(keep uint64) {
	a := s.alloc("forward", 4096)
	if keep > 0 {
		s.alloc("cache_result", keep)
	}
	s.free(a, 4096)
}

func testFilter(t *testing.T) *callsite.Filter {
	t.Helper()
	f, err := callsite.NewFilter("", "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stepsString renders steps as "label[first,end)" joined by spaces.
func stepsString(steps []Step) string {
	var b []string
	for _, s := range steps {
		b = append(b, fmt.Sprintf("%s[%d,%d)", s.Label, s.First, s.End))
	}
	return strings.Join(b, " ")
}

func TestDetectSteps(t *testing.T) {
	tests := []struct {
		name   string
		script func(s *scriptTrace)
		source StepSource
		marker string
		steps  string // stepsString
		reason string // substring of Reason
	}{{
		name: "user metadata, JSON and key=value, with untagged events",
		script: func(s *scriptTrace) {
			s.alloc("load", 512)
			for n := 1; n <= 3; n++ {
				s.metadata(fmt.Sprintf("phase=train;step=%d", n))
				if n == 3 {
					s.metadata(`{"phase": "train", "step": 3}`)
				}
				s.iteration(0)
			}
		},
		source: SourceUserMetadata, marker: "step",
		steps: "step=1[1,4) step=2[4,7) step=3[7,10)",
	}, {
		name: "metadata wins over annotations; substep does not count",
		script: func(s *scriptTrace) {
			s.annotate("START", "train_step#1")
			s.metadata("substep=4;iter=1")
			s.iteration(0)
			s.annotate("END", "train_step#1")
		},
		source: SourceUserMetadata, marker: "iter", steps: "iter=1[0,3)",
	}, {
		name: "numbered record_function ranges leave the gaps between steps out",
		script: func(s *scriptTrace) {
			s.alloc("load", 512)
			for n := 1; n <= 3; n++ {
				s.annotate("START", fmt.Sprintf("train_step#%d", n))
				s.iteration(0)
				s.annotate("END", fmt.Sprintf("train_step#%d", n))
				s.alloc("log", 512)
			}
		},
		source: SourceAnnotation, marker: "train_step#N",
		steps: "train_step#1[1,4) train_step#2[5,8) train_step#3[9,12)",
	}, {
		name: "the outer family wins over a nested one; compiled regions never count",
		script: func(s *scriptTrace) {
			for n := 1; n <= 2; n++ {
				s.annotate("START", fmt.Sprintf("step#%d", n))
				for m := 1; m <= 2; m++ {
					s.annotate("START", fmt.Sprintf("microbatch#%d", 2*n+m))
					s.annotate("START", "Torch-Compiled Region: 0/1")
					s.iteration(0)
					s.annotate("END", "Torch-Compiled Region: 0/1")
					s.annotate("END", fmt.Sprintf("microbatch#%d", 2*n+m))
				}
				s.annotate("END", fmt.Sprintf("step#%d", n))
			}
		},
		source: SourceAnnotation, marker: "step#N",
		steps: "step#1[0,6) step#2[6,12)",
	}, {
		name: "ProfilerStep wins over a larger user family",
		script: func(s *scriptTrace) {
			s.annotate("START", "epoch#1")
			for n := 1; n <= 2; n++ {
				s.annotate("START", fmt.Sprintf("ProfilerStep#%d", n))
				s.iteration(0)
				s.annotate("END", fmt.Sprintf("ProfilerStep#%d", n))
				s.alloc("eval", 512)
			}
			s.annotate("END", "epoch#1")
			s.annotate("START", "epoch#2")
			s.alloc("eval", 512)
			s.annotate("END", "epoch#2")
		},
		source: SourceAnnotation, marker: "ProfilerStep#N",
		steps: "ProfilerStep#1[0,3) ProfilerStep#2[4,7)",
	}, {
		name: "Optimizer.step ends each step; a lost START is reported",
		script: func(s *scriptTrace) {
			s.annotate("END", "## forward ##")
			for n := 1; n <= 3; n++ {
				s.iteration(0)
				s.annotate("START", "Optimizer.step#Adam.step")
				s.alloc("adam_state", 512)
				s.annotate("END", "Optimizer.step#Adam.step")
			}
			s.alloc("teardown", 512)
		},
		source: SourceAnnotation, marker: "Optimizer.step#Adam.step",
		steps:  "Optimizer.step#Adam.step (1)[0,4) Optimizer.step#Adam.step (2)[4,8) Optimizer.step#Adam.step (3)[8,12)",
		reason: "1 START or END annotations had no partner",
	}, {
		name: "periodicity: setup, then a loop opened by the same site",
		script: func(s *scriptTrace) {
			s.alloc("load_weights", 1<<20)
			s.alloc("load_weights", 1<<20)
			for range 4 {
				s.iteration(0)
			}
		},
		source: SourcePeriodicity, marker: "forward (/home/u/train.py:1)",
		steps: "period 1[2,5) period 2[5,8) period 3[8,11) period 4[11,14)",
	}, {
		name: "no loop at all",
		script: func(s *scriptTrace) {
			for _, fn := range []string{"a", "b", "c", "d"} {
				s.alloc(fn, 512)
			}
		},
		steps:  "",
		reason: "no step markers",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptTrace()
			tt.script(s)
			sn := s.build()
			tl, err := replay.Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := DetectSteps(sn, tl, testFilter(t))
			if got.Source != tt.source || got.Marker != tt.marker {
				t.Errorf("source, marker = %q, %q; want %q, %q (reason: %s)", got.Source, got.Marker, tt.source, tt.marker, got.Reason)
			}
			if s := stepsString(got.Steps); s != tt.steps {
				t.Errorf("steps:\n got %s\nwant %s", s, tt.steps)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tt.reason)
			}
			for _, st := range got.Steps {
				if st.Source != tt.source {
					t.Errorf("step %s has source %q", st.Label, st.Source)
				}
			}
		})
	}
}

func TestDetectStepsEmptyTrace(t *testing.T) {
	sn := snapshot.New()
	tl, err := replay.Device(sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := DetectSteps(sn, tl, testFilter(t))
	if len(got.Steps) != 0 || got.Steps == nil || !strings.Contains(got.Reason, "no trace events") {
		t.Errorf("got %+v", got)
	}
}

func TestNumberedFamily(t *testing.T) {
	for _, tt := range []struct{ name, family string }{
		{"ProfilerStep#12", "ProfilerStep#N"},
		{"train_step#3", "train_step#N"},
		{"Optimizer.step#Adam.step", ""},
		{"epoch 10", "epoch N"},
		{"2024", ""},
		{"", ""},
		{"first line\nstep#1", ""}, // no line break before the last character
		{"step#\n1", "step#\nN"},   // but the character before the number may be one
	} {
		got, ok := numberedFamily(tt.name)
		if got != tt.family || ok != (tt.family != "") {
			t.Errorf("numberedFamily(%q) = %q, %v; want %q", tt.name, got, ok, tt.family)
		}
	}
}

func TestDeviceAnnotations(t *testing.T) {
	ann := func(dev int, us int64) snapshot.Annotation {
		return snapshot.Annotation{Name: fmt.Sprint(us), Stage: "START", Device: dev, TimeUS: us}
	}
	times := func(anns []snapshot.Annotation) []int64 {
		var out []int64
		for _, a := range anns {
			out = append(out, a.TimeUS)
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		anns   []snapshot.Annotation
		device int
		want   []int64
	}{
		{"one device in order", []snapshot.Annotation{ann(0, 1), ann(0, 2), ann(0, 3)}, 0, []int64{1, 2, 3}},
		{"one device out of order", []snapshot.Annotation{ann(0, 3), ann(0, 1), ann(0, 2)}, 0, []int64{1, 2, 3}},
		{"none names the device", []snapshot.Annotation{ann(0, 2), ann(0, 1)}, 1, []int64{1, 2}},
		{"two devices", []snapshot.Annotation{ann(1, 4), ann(0, 3), ann(1, 1), ann(0, 2)}, 1, []int64{1, 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.anns)
			if got := times(deviceAnnotations(tt.anns, tt.device)); !slices.Equal(got, tt.want) {
				t.Errorf("times %v, want %v", got, tt.want)
			}
			if !slices.Equal(tt.anns, before) {
				t.Errorf("the snapshot's annotations were reordered: %v", times(tt.anns))
			}
		})
	}
}

func TestGallop(t *testing.T) {
	for n := range 40 {
		for answer := 0; answer <= n; answer++ {
			for from := 0; from <= answer; from++ {
				f := func(i int) bool {
					if i < from || i >= n {
						t.Fatalf("n %d, from %d: probed %d", n, from, i)
					}
					return i >= answer
				}
				if got := gallop(n, from, f); got != answer {
					t.Errorf("gallop(%d, %d) = %d, want %d", n, from, got, answer)
				}
			}
		}
	}
}

// The allocations' sites are numbered in order of first occurrence, a
// stack's by the stack, an allocation without one by its size and by
// which empty stack it has; a period anchored at a site fits the sites
// that occur equally often in every period it cuts, none before the first.
func TestAllocSeqPeriod(t *testing.T) {
	const a, b, c, d = 7, 3, 5, 9 // stacks
	noStack := func(size uint64) snapshot.Event {
		return snapshot.Event{Action: snapshot.ActionAlloc, Stack: snapshot.NoStack, Size: size}
	}
	var evs []snapshot.Event
	for _, st := range []snapshot.StackID{c, a, b, b, c, d, a, b, c, b, d, a, b, b, d, d} {
		evs = append(evs, snapshot.Event{Action: snapshot.ActionAlloc, Stack: st, Size: 512})
		// Frees are no sites.
		evs = append(evs, snapshot.Event{Action: snapshot.ActionFreeCompleted, Stack: st, Size: 512})
	}
	evs = append(evs, noStack(512), noStack(1024), noStack(512),
		snapshot.Event{Action: snapshot.ActionAlloc, Stack: snapshot.EmptyStack, Size: 512})
	s := newAllocSeq(snapshot.NewTrace(evs, nil))
	if want := []int{3, 3, 6, 4, 2, 1, 1}; !slices.Equal(s.count, want) {
		t.Fatalf("site counts %v, want %v (c, a, b, d, 512 B without a stack, 1 KiB, 512 B with an empty one)", s.count, want)
	}
	if want := []snapshot.StackID{c, a, b, d, snapshot.NoStack, snapshot.NoStack, snapshot.EmptyStack}; !slices.Equal(s.stacks, want) {
		t.Errorf("site stacks %v, want %v", s.stacks, want)
	}
	// Anchored at a (site 1), three periods: a and b (twice in each)
	// fit; c occurs before the first, d 4 times, the 512 B site twice.
	p := s.period(1, 3)
	if want := []bool{false, true, true, false, false, false, false}; !slices.Equal(p.fits, want) {
		t.Errorf("fits %v, want %v", p.fits, want)
	}
	if want := 9.0 / 18; p.score != want {
		t.Errorf("score %v, want %v (a and b's 9 of 18 repeating allocations)", p.score, want)
	}
}
