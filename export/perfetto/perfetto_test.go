package perfetto

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vramscope/vramscope/replay"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func load(t *testing.T, path string) Process {
	t.Helper()
	sn := testutil.Snapshot(t, path)
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatalf("replaying %s: %v", path, err)
	}
	return Process{Name: filepath.Base(path), Snapshot: sn, Timelines: tls}
}

func write(t *testing.T, procs []Process, opt Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, procs, opt); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGolden pins the whole trace of one small fixture with OOM, snapshot
// and annotation events, downsampled hard so bucketing is pinned too.
func TestGolden(t *testing.T) {
	p := load(t, "../../snapshot/testdata/format/default.pickle")
	got := write(t, []Process{p}, Options{Points: 100, Largest: 10})
	path := filepath.Join("testdata", "default.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		if err := os.WriteFile(path+".got", got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s differs (diff -u %s %s.got; go test -update to accept)", path, path, path)
	}
}

// parsedEvent reads back what a trace viewer reads.
type parsedEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	TS   int64          `json:"ts"`
	Dur  *int64         `json:"dur"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

// TestStructure checks, on several fixtures and downsampling levels, that
// the output is one JSON object whose counters reach exactly the replayed
// peaks, whose series respect the point budget, whose slices are the
// requested number with non-negative durations on named threads, and
// whose processes are named.
func TestStructure(t *testing.T) {
	tests := []struct {
		fixture string
		points  int
		largest int
	}{
		{"../../snapshot/testdata/format/default.pickle", 0, 200},
		{"../../snapshot/testdata/format/default.pickle", 10, 3},
		{"../../snapshot/testdata/format/fragoom.pickle", 40, 50},
		{"../../snapshot/testdata/format/train.pickle", 8, 0},
		{"../../snapshot/testdata/format/ring.pickle", 6, 5},
		{"../../snapshot/testdata/format/state_only.pickle", 0, 5},
		{"../../testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz", 30, 20},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.fixture), func(t *testing.T) {
			p := load(t, tt.fixture)
			out := write(t, []Process{p}, Options{Points: tt.points, Largest: tt.largest})
			var doc struct {
				TraceEvents []parsedEvent `json:"traceEvents"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatalf("trace is not JSON: %v", err)
			}
			maxOf := map[string]int64{}
			points := map[string]int{}
			threads := map[int]bool{}
			blockSlices, procName := 0, false
			for _, e := range doc.TraceEvents {
				switch e.Ph {
				case "C":
					for k, v := range e.Args {
						key := e.Name + " " + k
						maxOf[key] = max(maxOf[key], int64(v.(float64)))
						points[key]++
					}
				case "M":
					procName = procName || e.Name == "process_name"
					if e.Name == "thread_name" {
						threads[e.TID] = true
					}
				case "X":
					if e.Name == "" || e.Dur == nil || *e.Dur < 0 || !threads[e.TID] {
						t.Errorf("bad complete event %+v", e)
					}
					if _, ok := e.Args["bytes"]; ok {
						blockSlices++
					}
				case "i":
					if !threads[e.TID] {
						t.Errorf("instant on an unnamed thread: %+v", e)
					}
				}
			}
			if !procName {
				t.Error("no process_name metadata")
			}
			budget := tt.points
			if budget == 0 {
				budget = DefaultPoints
			}
			wantSlices := 0
			for _, tl := range p.Timelines {
				wantSlices += min(tt.largest, tl.NumAllocations())
				for _, m := range counterMetrics {
					key := device(tl) + " " + m.String()
					if got, want := maxOf[key], tl.Peak(m).Bytes; got != want {
						t.Errorf("%s: counter max %d, replayed peak %d", key, got, want)
					}
					if points[key] > budget+1 { // +1: the initial state
						t.Errorf("%s: %d points, budget %d", key, points[key], budget)
					}
				}
			}
			if blockSlices != wantSlices {
				t.Errorf("%d block slices, want %d", blockSlices, wantSlices)
			}
		})
	}
}

// TestProcesses: several snapshots become separate processes on one clock.
func TestProcesses(t *testing.T) {
	a := load(t, "../../testdata/scenarios/out/two_procs/step4/actor_rank0_pid750.pickle.gz")
	b := load(t, "../../testdata/scenarios/out/two_procs/step4/rollout_rank1_pid751.pickle.gz")
	out := write(t, []Process{a, b}, Options{Largest: 1})
	var doc struct {
		TraceEvents []parsedEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	minTS := int64(1) << 62
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			names[e.PID] = e.Args["name"].(string)
		}
		if e.Ph != "M" {
			minTS = min(minTS, e.TS)
		}
	}
	if names[1] != filepath.Base("actor_rank0_pid750.pickle.gz") || names[2] != "rollout_rank1_pid751.pickle.gz" {
		t.Errorf("process names %v", names)
	}
	if minTS != 0 {
		t.Errorf("earliest timestamp %d, want 0", minTS)
	}
}

// TestLanes: intervals share a lane when disjoint or nested, never when
// they partly overlap.
func TestLanes(t *testing.T) {
	tests := []struct {
		name      string
		intervals [][2]int64
		want      []int
	}{
		{"disjoint", [][2]int64{{0, 5}, {5, 9}, {10, 12}}, []int{0, 0, 0}},
		{"nested", [][2]int64{{0, 10}, {1, 9}, {2, 3}, {4, 9}}, []int{0, 0, 0, 0}},
		{"overlap", [][2]int64{{0, 5}, {3, 8}, {6, 9}}, []int{0, 1, 0}},
		{"closes nested first", [][2]int64{{0, 10}, {1, 4}, {5, 12}}, []int{0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l lanes
			for i, iv := range tt.intervals {
				if got := l.place(iv[0], iv[1]); got != tt.want[i] {
					t.Errorf("interval %v: lane %d, want %d", iv, got, tt.want[i])
				}
			}
		})
	}
}

// TestAnnotationBudget: past Options.Annotations ranges per device, the
// longest are kept and the rest are counted as dropped.
func TestAnnotationBudget(t *testing.T) {
	p := load(t, "../../snapshot/testdata/format/train.pickle")
	pairs, _ := pairAnnotations(p.Snapshot.Annotations, 0)
	if len(pairs) < 2 {
		t.Fatalf("train.pickle has %d annotation ranges; the test needs 2", len(pairs))
	}
	var longest int64
	for _, pr := range pairs {
		longest = max(longest, pr.end.TimeUS-pr.start.TimeUS)
	}
	var buf bytes.Buffer
	st, err := Write(&buf, []Process{p}, Options{Annotations: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.DroppedAnnotations != len(pairs)-1 {
		t.Errorf("dropped %d annotations, want %d", st.DroppedAnnotations, len(pairs)-1)
	}
	var doc struct {
		TraceEvents []struct {
			Cat string `json:"cat"`
			Dur int64  `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var durs []int64
	for _, e := range doc.TraceEvents {
		if e.Cat == "annotation" {
			durs = append(durs, e.Dur)
		}
	}
	if len(durs) != 1 || durs[0] != longest {
		t.Errorf("annotation durations %v, want the longest, [%d]", durs, longest)
	}
}

// TestLargest: the n largest allocations, the earlier of equal ones first.
func TestLargest(t *testing.T) {
	sizes := []uint64{5, 9, 5, 9, 1}
	tests := []struct {
		n    int
		want []int
	}{
		{0, []int{}},
		{1, []int{1}},
		{3, []int{1, 3, 0}},
		{9, []int{1, 3, 0, 2, 4}},
	}
	for _, tt := range tests {
		got := largest(len(sizes), tt.n, func(k int) uint64 { return sizes[k] })
		if !slices.Equal(got, tt.want) {
			t.Errorf("largest(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}
