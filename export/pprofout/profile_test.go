package pprofout

import (
	"bytes"
	"flag"
	"github.com/vramscope/vramscope/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixtures are real snapshots covering every way a block can lack a
// stack, private pools, side streams, pending frees and user metadata.
var fixtures = []string{
	"../../snapshot/testdata/format/default.pickle",
	"../../snapshot/testdata/format/cpp_pickled.pickle",
	"../../snapshot/testdata/format/graphs_pools.pickle",
	"../../snapshot/testdata/format/nocontext.pickle",
	"../../snapshot/testdata/format/pending.pickle",
	"../../snapshot/testdata/format/prehistory.pickle",
	"../../snapshot/testdata/format/ring.pickle",
	"../../snapshot/testdata/format/state_only.pickle",
	"../../snapshot/testdata/format/train.pickle",
	"../../snapshot/testdata/format/fragoom_expandable.pickle",
	"../../testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz",
	"../../testdata/scenarios/out/two_procs/step4/actor_rank0_pid750.pickle.gz",
}

func load(t *testing.T, path string) (*snapshot.Snapshot, []*replay.Timeline) {
	t.Helper()
	sn := testutil.Snapshot(t, path)
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatalf("replaying %s: %v", path, err)
	}
	return sn, tls
}

// roundTrip writes blocks and parses the bytes back with the pprof library.
func roundTrip(t *testing.T, sn *snapshot.Snapshot, blocks []Block, meta Meta) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(&buf, sn, blocks, meta); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatalf("parsing the written profile: %v", err)
	}
	return p
}

// totals sums the parsed profile's values: all samples, and those labelled
// state=allocated.
type totals struct{ objects, bytes, allocated int64 }

func sumProfile(p *profile.Profile) totals {
	var s totals
	for _, x := range p.Sample {
		s.objects += x.Value[0]
		s.bytes += x.Value[1]
		if x.Label["state"][0] == "allocated" {
			s.allocated += x.Value[1]
		}
	}
	return s
}

// TestRoundTripEnd: the end profile's inuse_space is the snapshot's active
// bytes (allocated plus pending free), its state=allocated part the
// snapshot's allocated bytes, and inuse_objects its active block count.
func TestRoundTripEnd(t *testing.T) {
	for _, path := range fixtures {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sn, tls := load(t, path)
			blocks, _ := Live(sn, tls, End)
			var want totals
			for i := range sn.Segments {
				seg := &sn.Segments[i]
				want.bytes += int64(seg.ActiveSize)
				want.allocated += int64(seg.AllocatedSize)
				for _, b := range sn.SegmentBlocks(seg) {
					if b.State.Active() {
						want.objects++
					}
				}
			}
			if want.objects == 0 {
				t.Fatal("fixture has no active blocks: it tests nothing")
			}
			if got := sumProfile(roundTrip(t, sn, blocks, Meta{})); got != want {
				t.Errorf("profile totals %+v, snapshot %+v", got, want)
			}
		})
	}
}

// TestRoundTripPeak: the peak profile's state=allocated bytes are the
// replayed allocated peak of every device, and its total their active bytes
// at that event.
func TestRoundTripPeak(t *testing.T) {
	for _, path := range fixtures {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sn, tls := load(t, path)
			blocks, _ := Live(sn, tls, Peak)
			var want totals
			for _, tl := range tls {
				p := tl.Peak(replay.Allocated)
				want.allocated += p.Bytes
				want.bytes += tl.Value(replay.Active, p.Index)
				want.objects += int64(len(tl.LiveAt(p.Index)))
			}
			if got := sumProfile(roundTrip(t, sn, blocks, Meta{})); got != want {
				t.Errorf("profile totals %+v, replay %+v", got, want)
			}
		})
	}
}

// TestLabelsAndStacks checks what a reader filters on: every sample has
// the four labels and a leaf-first stack; blocks without frames get the
// synthetic location that says why.
func TestLabelsAndStacks(t *testing.T) {
	tests := []struct {
		fixture string
		at      Moment
		leaf    string // a leaf function that must appear
		label   string // a label key=value that must appear
	}{
		{"default.pickle", End, "", "user_metadata"},
		{"prehistory.pickle", End, beforeRecordingName, ""},
		{"nocontext.pickle", Peak, noContextName, ""},
		{"train.pickle", Peak, emptyStackName, ""},
		{"graphs_pools.pickle", End, "", "pool=(1,0)"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.at.String(), func(t *testing.T) {
			sn, tls := load(t, "../../snapshot/testdata/format/"+tt.fixture)
			blocks, _ := Live(sn, tls, tt.at)
			p := roundTrip(t, sn, blocks, Meta{})
			leaves, labels := map[string]bool{}, map[string]bool{}
			for _, s := range p.Sample {
				for _, key := range []string{"device", "stream", "state", "pool"} {
					if len(s.Label[key]) != 1 {
						t.Fatalf("sample without label %s: %v", key, s.Label)
					}
				}
				if len(s.Location) == 0 {
					t.Fatal("sample without location")
				}
				leaves[s.Location[0].Line[0].Function.Name] = true
				for k, v := range s.Label {
					labels[k] = true
					labels[k+"="+v[0]] = true
				}
			}
			if tt.leaf != "" && !leaves[tt.leaf] {
				t.Errorf("no sample has leaf %q; leaves: %v", tt.leaf, leaves)
			}
			if tt.label != "" && !labels[tt.label] {
				t.Errorf("no sample has label %q; labels: %v", tt.label, labels)
			}
		})
	}
}

// TestAllocationsPendingFree: a selection taken between a block's
// free_requested and its free_completed shows it as pending_free.
func TestAllocationsPendingFree(t *testing.T) {
	sn, tls := load(t, "../../snapshot/testdata/format/pending.pickle")
	tl := tls[0]
	for k := range tl.NumAllocations() {
		a := tl.Allocation(k)
		if a.Free < 0 || a.Free >= a.End || a.End == replay.LiveAtEnd {
			continue
		}
		i := int(a.Free)
		p := roundTrip(t, sn, Allocations(tl, i, []int{k}), Meta{})
		if got := p.Sample[0].Label["state"]; len(got) != 1 || got[0] != "pending_free" {
			t.Errorf("allocation %d after event %d: state %v, want pending_free", k, i, got)
		}
		return
	}
	t.Fatal("pending.pickle has no block pending free inside the trace")
}

// TestGolden pins the whole profile of one fixture in pprof's text form.
func TestGolden(t *testing.T) {
	sn, tls := load(t, "../../snapshot/testdata/format/default.pickle")
	for _, at := range []Moment{End, Peak} {
		blocks, timeUS := Live(sn, tls, at)
		p := roundTrip(t, sn, blocks, Meta{TimeUS: timeUS, Comments: []string{"default.pickle at " + at.String()}})
		checkGolden(t, "default."+at.String()+".string", p.String())
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		if err := os.WriteFile(path+".got", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s differs (diff -u %s %s.got; go test -update to accept)", name, path, path)
	}
}

// TestGoToolPprof runs the real pprof front end on written profiles:
// -top on one, and -diff_base between two steps of one leaking program,
// which works only if pprof matches their functions.
func TestGoToolPprof(t *testing.T) {
	// The toolchain running this test has its go command in GOROOT/bin,
	// whatever PATH says.
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Fatalf("the go command of this toolchain is missing: %v", err)
	}
	dir := t.TempDir()
	write := func(path, name string) string {
		sn, tls := load(t, path)
		blocks, _ := Live(sn, tls, End)
		out := filepath.Join(dir, name)
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Write(f, sn, blocks, Meta{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	base := write("../../testdata/scenarios/out/leak_closure/step2/server_rank0_pid561.pickle.gz", "step2.pb.gz")
	cur := write("../../testdata/scenarios/out/leak_closure/step4/server_rank0_pid561.pickle.gz", "step4.pb.gz")

	tests := []struct {
		name   string
		args   []string
		want   []string
		absent []string
	}{
		{"top", []string{"-top", cur}, []string{"Type: inuse_space", "init_kv_cache_pool", "compute_next_token_logits"}, nil},
		// The KV cache is the same in both steps: it cancels out, and only
		// the leaking closure's growth is left.
		{"diff", []string{"-top", "-diff_base", base, cur}, []string{"compute_next_token_logits"}, []string{"init_kv_cache_pool"}},
		{"tagfocus", []string{"-top", "-tagfocus", "state=allocated", cur}, []string{"Active filters:", "init_kv_cache_pool"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(goTool, append([]string{"tool", "pprof"}, tt.args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go tool pprof %v: %v\n%s", tt.args, err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(string(out), a) {
					t.Errorf("output has %q:\n%s", a, out)
				}
			}
		})
	}
}
