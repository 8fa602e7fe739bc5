package replay

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/snapshot"
)

// The placer in shards gives the timeline one placer gives, on every
// GPU-made snapshot (those of the allocator what-if too, whose traces the
// layout does not always follow), in batches of every length: exactly,
// or it says it was not exact and Device replays with one. So do the
// split unpackers and writers, which are always exact.
func TestShardedPlacer(t *testing.T) {
	paths := testutil.Fixtures(t)
	more, _ := filepath.Glob(filepath.Join("..", "testdata", "allocsim", "out", "*", "*.pickle.gz"))
	paths = append(paths, more...)
	snaps := map[string]*snapshot.Snapshot{
		"inconsistent": inconsistentTrace(3),
		"steps":        stepTrace(3000),
	}
	for _, path := range paths {
		snaps[strings.TrimPrefix(path, "../")] = testutil.Snapshot(t, path)
	}
	exact := map[string]bool{}
	batchLen := placedBatchLen
	defer func() { placedBatchLen = batchLen }()
	for name, sn := range snaps {
		for d := range sn.Devices() {
			var tr snapshot.Trace
			if d < len(sn.Traces) {
				tr = sn.Traces[d]
			}
			placedBatchLen = batchLen
			one := replayDevice(sn, d, tr, stages{1, 1, 1, 2})
			if one.inexact {
				t.Fatalf("%s: one placer says it was not exact", name)
			}
			for _, st := range []stages{{1, 2, 3, 3}, {2, 1, 2, 1}, {3, 2, 3, 16}, {4, 3, 1, 5}} {
				for _, n := range []int{batchLen, 7} {
					placedBatchLen = n
					got := replayDevice(sn, d, tr, st)
					if st.shards > 1 {
						exact[name] = !got.inexact
					}
					if got.inexact {
						continue
					}
					if !reflect.DeepEqual(got.t, one.t) {
						t.Errorf("%s device %d: stages %+v, batches of %d, give another timeline", name, d, st, n)
					}
				}
			}
		}
	}
	// Where the layout follows the trace the shards vouch for their work;
	// where it does not, they do not.
	for name, want := range map[string]bool{
		"testdata/scenarios/out/bench_source/bench_source.pickle.gz": true,
		"inconsistent": false,
		"steps":        true,
		"testdata/allocsim/out/weight_update/roundup4.pickle.gz": true, // blocks taken from inside free ranges
	} {
		if exact[name] != want {
			t.Errorf("%s: exact %v, want %v", name, exact[name], want)
		}
	}
	n := 0
	for _, e := range exact {
		if e {
			n++
		}
	}
	if len(more) < 40 {
		t.Errorf("found %d allocator what-if snapshots, want the 40+ in the repository", len(more))
	}
	t.Logf("%d of %d snapshots exact in shards", n, len(exact))
}

// The router gives new segments to the shard with the fewest block events
// so far: on the bench seed, whose busiest segment has 37% of the allocs
// and frees, no shard of four places more than 40% of them (taking turns,
// one placed 58%).
func TestRouterBalance(t *testing.T) {
	sn := testutil.Snapshot(t, "../testdata/scenarios/out/bench_source/bench_source.pickle.gz")
	r := replayDevice(sn, 0, sn.Traces[0], stages{4, 1, 1, 8})
	if r.inexact {
		t.Fatal("not exact in shards")
	}
	total, most := 0, 0
	for _, n := range r.routed {
		total += n
		most = max(most, n)
	}
	if len(r.routed) != 4 || total == 0 {
		t.Fatalf("routed %v, want block events for 4 shards", r.routed)
	}
	if share := float64(most) / float64(total); share > 0.40 || share < 0.37 {
		t.Errorf("the busiest shard placed %.3f of %d block events (%v), want 0.37-0.40", share, total, r.routed)
	}
}
