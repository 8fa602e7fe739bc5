package diagnose

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// fixture is one device of a snapshot under testdata, replayed.
type fixture struct {
	sn *snapshot.Snapshot
	tl *replay.Timeline
	f  *callsite.Filter
}

func loadFixture(t *testing.T, path string) fixture {
	t.Helper()
	sn := testutil.Snapshot(t, filepath.Join("..", path))
	tls, err := replay.Devices(sn)
	if err != nil || len(tls) != 1 {
		t.Fatalf("%s: %d timelines, %v", path, len(tls), err)
	}
	f, err := callsite.NewFilter("", "")
	if err != nil {
		t.Fatal(err)
	}
	return fixture{sn, tls[0], f}
}

// sidecar reads the torch numbers stored next to a scenario pickle.
func sidecar(t *testing.T, pickleGz string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", strings.TrimSuffix(pickleGz, ".gz")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func num(t *testing.T, m map[string]any, key string) int64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("sidecar has no number %q", key)
	}
	return int64(v)
}

const scenarios = "testdata/scenarios/out/"

func TestPeakMatchesTorch(t *testing.T) {
	tests := []struct {
		path            string
		largestFunc     string
		largestBytes    int64
		peakWithout     int64
		severity        Severity
		transientCalled int // transient callsites at the peak
	}{
		// seed 002: bf16 logits (600 MB), .float() copy and log_softmax
		// output (1.2 GB each) live at once in compute_logprobs.
		{scenarios + "peak_upcast/peak_upcast.pickle.gz", "compute_logprobs", 1200000000, 3342892544 - 1200000000, High, 3},
		// the fix: 250-row chunks; the logits are now the largest transient.
		{scenarios + "peak_chunked/peak_chunked.pickle.gz", "model_forward", 600000000, 1243887616 - 600000000, High, 3},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			fx := loadFixture(t, tt.path)
			side := sidecar(t, tt.path)
			r := Peak(fx.sn, fx.tl, fx.f)
			if !r.Complete {
				t.Errorf("recording started at process start, Complete = false (caveats %v)", fx.tl.Caveats)
			}
			if want := num(t, side, "max_memory_allocated"); r.Allocated.Bytes != want {
				t.Errorf("allocated peak %d, torch's max_memory_allocated %d", r.Allocated.Bytes, want)
			}
			if want := num(t, side, "max_memory_reserved"); r.Reserved.Bytes != want {
				t.Errorf("reserved peak %d, torch's max_memory_reserved %d", r.Reserved.Bytes, want)
			}
			if got := r.PersistentBytes + r.TransientBytes; got != r.Allocated.Bytes {
				t.Errorf("persistent %d + transient %d = %d, want the peak %d", r.PersistentBytes, r.TransientBytes, got, r.Allocated.Bytes)
			}
			if want := num(t, side, "allocated_bytes.all.current"); r.PersistentBytes != want {
				t.Errorf("persistent bytes %d, want what is still allocated at the dump, %d", r.PersistentBytes, want)
			}
			if len(r.Transient) != tt.transientCalled {
				t.Errorf("%d transient callsites, want %d", len(r.Transient), tt.transientCalled)
			}
			l := r.Largest
			if l == nil || l.Site.Frame.Name != tt.largestFunc || l.Requested != tt.largestBytes || l.PeakWithout.Bytes != tt.peakWithout {
				t.Fatalf("largest transient %+v, want %s, %d bytes, peak without it %d", l, tt.largestFunc, tt.largestBytes, tt.peakWithout)
			}
			fds := r.Findings()
			if len(fds) != 1 || fds[0].Kind != KindPeak || fds[0].Severity != tt.severity ||
				fds[0].Callsite == nil || fds[0].Callsite.Function != tt.largestFunc || fds[0].Bytes != r.Allocated.Bytes {
				t.Errorf("findings %+v", fds)
			}
		})
	}
}

// TestPeakUpcastLiveSet checks the seed-002 live set at the peak: the
// weights persist; the bf16 logits, their fp32 copy and the log_softmax
// output are the transients, the copy first.
func TestPeakUpcastLiveSet(t *testing.T) {
	fx := loadFixture(t, scenarios+"peak_upcast/peak_upcast.pickle.gz")
	r := Peak(fx.sn, fx.tl, fx.f)
	want := []struct {
		fn    string
		line  uint64
		bytes int64
	}{
		{"compute_logprobs", 40, 1200000000}, // logits.float()
		{"compute_logprobs", 41, 1200000000}, // torch.log_softmax
		{"model_forward", 35, 600000000},     // bf16 logits
	}
	for i, w := range want {
		g := r.Transient[i]
		if g.Site.Frame.Name != w.fn || g.Site.Frame.Line != w.line || g.Bytes != w.bytes || g.Count != 1 {
			t.Errorf("transient %d = %v %d bytes in %d, want %s:%d %d", i, g.Site, g.Bytes, g.Count, w.fn, w.line, w.bytes)
		}
	}
	if g := r.Persistent[0]; g.Site.Frame.Name != "build_model" || g.Bytes != 307200000 {
		t.Errorf("largest persistent = %v %d, want the build_model weights, 307200000", g.Site, g.Bytes)
	}
	if r.Site.Frame.Name != "compute_logprobs" {
		t.Errorf("peak event's callsite %v, want compute_logprobs", r.Site)
	}
}

// TestPeakFindingKinds checks which peak finding a trace gets: the largest
// transient block when removing it lowers the peak, the line of code whose
// blocks take turns at the peak when removing one does not, and the blocks
// that stay allocated when nothing transient sets the peak.
func TestPeakFindingKinds(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name   string
		script func(s *scriptTrace)
		title  string // prefix
		fix    string // substring
		blame  string // callsite function
		saving int64  // evidence saving_bytes; -1 for none
	}{{
		name: "one transient block on top",
		script: func(s *scriptTrace) {
			s.alloc("load_weights", 100*MiB)
			b := s.alloc("upcast", 40*MiB)
			s.free(b, 40*MiB)
		},
		title: "allocated memory peaks at 140.00 MiB; a transient 40.00 MiB block from upcast",
		fix:   "lowers the peak from 140.00 MiB to 100.00 MiB (-40.00 MiB)",
		blame: "upcast", saving: 40 * MiB,
	}, {
		name: "one line's equal blocks take turns at the peak",
		script: func(s *scriptTrace) {
			s.alloc("load_weights", 100*MiB)
			for range 4 {
				b := s.alloc("request_logits", 20*MiB)
				s.free(b, 20*MiB)
			}
		},
		title: "allocated memory peaks at 120.00 MiB; transient blocks from request_logits (/home/u/train.py:1) (20.00 MiB at the peak) sit on top of it",
		fix:   "allocates 4 blocks that are freed again before the end; removing only the largest barely moves the peak, since the next one reaches it again, but computing them in chunks, or freeing what they replace before they are created, lowers the peak from 120.00 MiB to 100.00 MiB (-20.00 MiB)",
		blame: "request_logits", saving: 20 * MiB,
	}, {
		name: "activations that stay allocated make the peak",
		script: func(s *scriptTrace) {
			s.alloc("load_weights", 100*MiB)
			b := s.alloc("scratch", 8*MiB)
			s.free(b, 8*MiB)
			for range 3 {
				s.alloc("layer_forward", 30*MiB)
			}
		},
		title: "allocated memory peaks at 190.00 MiB, 190.00 MiB of it in blocks that stay allocated; load_weights (/home/u/train.py:1) holds 100.00 MiB of them",
		fix:   "No block freed within the trace is part of the peak. The peak is what stays allocated (from before the trace began, or to its end): 100.00 MiB from load_weights (/home/u/train.py:1), 90.00 MiB from layer_forward (/home/u/train.py:1).",
		blame: "load_weights", saving: -1,
	}, {
		name: "a transient block at the peak that saves under 1%",
		script: func(s *scriptTrace) {
			s.alloc("load_weights", 400*MiB)
			b := s.alloc("scratch", 2*MiB)
			s.alloc("layer_forward", 2*MiB)
			s.free(b, 2*MiB)
			s.alloc("layer_forward", 2*MiB)
		},
		title: "allocated memory peaks at 404.00 MiB, 402.00 MiB of it in blocks that stay allocated",
		fix:   "Trimming what is freed within the trace does not lower it: without the largest such block (2.00 MiB from scratch (/home/u/train.py:1)) the peak stays at 404.00 MiB.",
		blame: "load_weights", saving: 0,
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
			fds := Peak(sn, tl, testFilter(t)).Findings()
			if len(fds) != 1 {
				t.Fatalf("%d findings, want 1: %+v", len(fds), fds)
			}
			fd := fds[0]
			if !strings.HasPrefix(fd.Title, tt.title) || !strings.Contains(fd.Fix, tt.fix) {
				t.Errorf("title %q\n fix %q\nwant %q\n and %q", fd.Title, fd.Fix, tt.title, tt.fix)
			}
			if fd.Callsite == nil || fd.Callsite.Function != tt.blame {
				t.Errorf("blamed %+v, want %s", fd.Callsite, tt.blame)
			}
			saving, ok := fd.Evidence["saving_bytes"].(int64)
			if tt.saving < 0 && ok || tt.saving >= 0 && saving != tt.saving {
				t.Errorf("saving_bytes %v, want %d", fd.Evidence["saving_bytes"], tt.saving)
			}
		})
	}
}

// TestPeakAdviceSaves checks, on every fixture with a trace, that a peak
// finding whose fix promises a lower peak saves at least 1% of it.
func TestPeakAdviceSaves(t *testing.T) {
	for _, file := range fixtureFiles(t) {
		sn, tls := replayFile(t, file)
		for _, tl := range tls {
			if tl.Len() == 0 {
				continue
			}
			for _, fd := range Peak(sn, tl, testFilter(t)).Findings() {
				peak := fd.Evidence["peak_allocated_bytes"].(int64)
				saving, _ := fd.Evidence["saving_bytes"].(int64)
				if strings.Contains(fd.Fix, "lowers the peak") && float64(saving) < minPeakSaving*float64(peak) {
					t.Errorf("%s: %s: %s saves %d of %d", file, fd.Title, fd.Fix, saving, peak)
				}
			}
		}
	}
}

// fixtureFiles lists the repository's snapshot fixtures, relative to the
// repository root: the scenarios' (single files and per-step dumps) and
// the format samples.
func fixtureFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{scenarios + "*/*.pickle.gz", scenarios + "*/step*/*.pickle.gz", "snapshot/testdata/format/*.pickle"} {
		m, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no fixtures match %s: %v", pattern, err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel("..", f)
			files = append(files, rel)
		}
	}
	return files
}

// replayFile reads a fixture (relative to the repository root) and replays
// every device.
func replayFile(t *testing.T, file string) (*snapshot.Snapshot, []*replay.Timeline) {
	t.Helper()
	sn := testutil.Snapshot(t, filepath.Join("..", file))
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatalf("replaying %s: %v", file, err)
	}
	return sn, tls
}
