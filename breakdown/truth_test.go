package breakdown

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

// truth is a testdata/breakdown recording: the snapshot, torch's profiler
// timeline and the objects alive at the dump.
type truth struct {
	name        string
	b           *Breakdown
	objects     [][3]any // [ptr, bytes, category]
	objectBytes map[string]int64
	profile     [][]any // [t_ns, action, bytes, category, ptr, allocation_id]
}

func loadTruth(t *testing.T, name string) *truth {
	t.Helper()
	dir := filepath.Join("..", "testdata", "breakdown", "out")
	sn := testutil.Snapshot(t, filepath.Join(dir, name+".pickle.gz"))
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatal(err)
	}
	tr := &truth{name: name, b: Classify(sn, tls[0], Options{})}
	raw, err := os.ReadFile(filepath.Join(dir, name+".pickle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Objects     [][3]any         `json:"objects"`
		ObjectBytes map[string]int64 `json:"objects_bytes"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	tr.objects, tr.objectBytes = meta.Objects, meta.ObjectBytes
	f, err := os.Open(filepath.Join(dir, name+".profile.json.gz"))
	if err == nil {
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Events [][]any `json:"events"`
		}
		if err := json.NewDecoder(zr).Decode(&p); err != nil {
			t.Fatal(err)
		}
		tr.profile = p.Events
	}
	return tr
}

// truthRuns are the ground-truth workloads of each recording in
// testdata/breakdown/out: the H100's (2026-11-24/25) and the H200's
// (2026-12-02, recorded again at 03:28 UTC after the breakdown's scan and
// sweep came to read less).
var truthRuns = func() (runs []string) {
	for _, rec := range []string{"", "h200-20261202/"} {
		for _, w := range []string{"mlp_adamw", "llama_train", "kv_generate", "fsdp_train"} {
			runs = append(runs, rec+w)
		}
	}
	return runs
}()

// requestedAt sums the requested bytes of the blocks allocated right
// after event i by category: what torch's own counts (storage nbytes) are.
func (tr *truth) requestedAt(i int) map[Category]int64 {
	out := map[Category]int64{}
	tl := tr.b.Timeline()
	for k := range tr.b.Len() {
		if a := tl.Allocation(k); a.AllocatedAt(i) {
			out[tr.b.Label(k).Category] += int64(a.Requested)
		}
	}
	return out
}

// TestTruthObjects checks the end of each run against the objects' own
// byte counts: parameters, gradients, optimizer state and the KV cache
// within 2%, and each object's block in the object's category.
func TestTruthObjects(t *testing.T) {
	for _, name := range truthRuns {
		t.Run(name, func(t *testing.T) {
			tr := loadTruth(t, name)
			tl := tr.b.Timeline()
			end := tl.Len() - 1
			got := tr.requestedAt(end)
			for _, c := range []Category{Parameter, Gradient, OptimizerState, KVCache} {
				want := tr.objectBytes[string(c)]
				t.Logf("%s: %s %d, objects %d", name, c, got[c], want)
				if want == 0 && got[c] == 0 {
					continue
				}
				if d := math.Abs(float64(got[c]-want)) / float64(max(want, 1)); d > 0.02 {
					t.Errorf("%s at the end: %d bytes, the objects hold %d (%.1f%% off)", c, got[c], want, 100*d)
				}
			}
			// Each object's storage is one block at its pointer.
			byAddr := map[uint64]Category{}
			for k := range tr.b.Len() {
				if a := tl.Allocation(k); a.AllocatedAt(end) {
					byAddr[a.Addr] = tr.b.Label(k).Category
				}
			}
			wrong := map[string]int{}
			for _, o := range tr.objects {
				ptr, want := uint64(o[0].(float64)), o[2].(string)
				if want == "buffer" { // the built-in rules call buffers parameters
					want = string(Parameter)
				}
				if got, ok := byAddr[ptr]; ok && string(got) != want {
					wrong[fmt.Sprintf("%s as %s", want, got)]++
				}
			}
			if len(wrong) > 0 {
				t.Errorf("objects whose block got another category: %v", wrong)
			}
		})
	}
}

// TestTruthCategorised: at the allocated peak at least 95% of the bytes
// get a category other than unknown.
func TestTruthCategorised(t *testing.T) {
	for _, name := range truthRuns {
		t.Run(name, func(t *testing.T) {
			tr := loadTruth(t, name)
			tl := tr.b.Timeline()
			tab := tr.b.Table(tl.Peak(replay.Allocated).Index, ByCategory)
			if tab.Total != tl.Peak(replay.Allocated).Bytes {
				t.Errorf("table total %d, allocated peak %d", tab.Total, tl.Peak(replay.Allocated).Bytes)
			}
			share := 1 - float64(tab.Bytes(string(Unknown)))/float64(tab.Total)
			t.Logf("%s peak: %d bytes, %.2f%% categorised: %v", name, tab.Total, 100*share, tab.Rows)
			if share < 0.95 {
				t.Errorf("%.1f%% of the peak categorised, want >= 95%%", 100*share)
			}
		})
	}
}

// profileLive is torch's live tensors at time tNS by its profiler's
// timeline: storage pointer -> category and bytes.
func (tr *truth) profileLive(tNS int64) map[uint64]profTensor {
	live := map[uint64]profTensor{}
	for _, e := range tr.profile {
		if int64(e[0].(float64)) > tNS {
			break
		}
		if e[4] == nil {
			continue
		}
		ptr, n, c := uint64(e[4].(float64)), int64(e[2].(float64)), e[3].(string)
		p := live[ptr]
		if n > 0 {
			p.category = c
		}
		p.bytes += n
		if p.bytes <= 0 {
			delete(live, ptr)
			continue
		}
		live[ptr] = p
	}
	return live
}

type profTensor struct {
	category string
	bytes    int64
}

// eventAt is the last trace event at or before tNS.
func (tr *truth) eventAt(tNS int64) int {
	tl := tr.b.Timeline()
	us := tNS / 1000
	return sort.Search(tl.Len(), func(i int) bool { return tl.Trace.At(i).TimeUS > us }) - 1
}

// TestTruthProfile compares the categories with torch's profiler memory
// timeline at several moments (its peak and quarters of its span), aligned
// by storage pointer: of the bytes torch files as parameter, gradient or
// optimizer state, at least 98% must be in blocks of the same category
// here. Where torch says unknown (or autograd_detail), the test only logs
// what the breakdown made of them.
func TestTruthProfile(t *testing.T) {
	for _, name := range truthRuns {
		t.Run(name, func(t *testing.T) {
			tr := loadTruth(t, name)
			if len(tr.profile) == 0 {
				t.Fatalf("%s: no profiler timeline", name)
			}
			var first, last, peakT, cur, peak int64
			for _, e := range tr.profile {
				ts := int64(e[0].(float64))
				if ts < 0 {
					continue
				}
				if first == 0 {
					first = ts
				}
				last = ts
				if cur += int64(e[2].(float64)); cur > peak {
					peak, peakT = cur, ts
				}
			}
			tl := tr.b.Timeline()
			for _, tNS := range []int64{peakT, first + (last-first)/4, first + (last-first)/2, first + 3*(last-first)/4} {
				i := tr.eventAt(tNS)
				mine := map[uint64]Category{}
				for k := range tr.b.Len() {
					if a := tl.Allocation(k); a.AllocatedAt(i) {
						mine[a.Addr] = tr.b.Label(k).Category
					}
				}
				agree := map[string][2]int64{} // torch category -> {bytes, bytes here in the same category}
				other := map[string]int64{}
				for ptr, p := range tr.profileLive(tNS) {
					got, ok := mine[ptr]
					v := agree[p.category]
					v[0] += p.bytes
					if ok && string(got) == p.category {
						v[1] += p.bytes
					}
					agree[p.category] = v
					if string(got) != p.category {
						other[fmt.Sprintf("%s->%s", p.category, got)] += p.bytes
					}
				}
				t.Logf("%s at t=%d (event %d): torch {category: [bytes, same here]} %v; elsewhere %v", name, tNS, i, agree, other)
				for _, c := range []string{"parameter", "gradient", "optimizer_state"} {
					if v := agree[c]; v[0] > 0 && float64(v[1]) < 0.98*float64(v[0]) {
						t.Errorf("%s at t=%d: torch's %s %d bytes, %d of them (%.1f%%) %s here", name, tNS, c, v[0], v[1], 100*float64(v[1])/float64(v[0]), c)
					}
				}
			}
		})
	}
}
