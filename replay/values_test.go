package replay

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/timelines.golden")

const timelinesGolden = "testdata/timelines.golden"

// TestFixtureValues reads every value a Timeline gives of every fixture
// back: each series at every event, each peak, each Allocation and
// Lifetime. The golden file holds their SHA-256 per device, with the
// number of allocations kept whole in Timeline.full, as the replay of
// commit 5de0953 (uint32 series, 20-byte records) gave them: a change of
// how a Timeline keeps them can change neither a value nor make more
// records full. The series are also checked against sums over the
// allocations, and traced allocations against their alloc events.
func TestFixtureValues(t *testing.T) {
	var got strings.Builder
	for _, path := range testutil.Fixtures(t) {
		sn := testutil.Snapshot(t, path)
		tls, err := Devices(sn)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), "../")
		for _, tl := range tls {
			checkSeriesSumAllocations(t, name, tl)
			fmt.Fprintf(&got, "%s device %d: %d events, %d allocations (%d full): %s\n", name, tl.Device, tl.Len(), tl.NumAllocations(), len(tl.full), timelineDigest(tl))
		}
	}
	if *update {
		if err := os.WriteFile(timelinesGolden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(timelinesGolden)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := map[string]bool{}
	for line := range strings.Lines(string(want)) {
		wantLines[line] = true
	}
	if len(wantLines) == 0 {
		t.Fatalf("%s is empty", timelinesGolden)
	}
	gotLines := map[string]bool{}
	for line := range strings.Lines(got.String()) {
		gotLines[line] = true
		if !wantLines[line] {
			t.Errorf("got   %s", strings.TrimSuffix(line, "\n"))
		}
	}
	for line := range wantLines {
		if !gotLines[line] {
			t.Errorf("want  %s", strings.TrimSuffix(line, "\n"))
		}
	}
}

// timelineDigest is the SHA-256 of every series value, peak, Allocation
// and Lifetime of tl.
func timelineDigest(tl *Timeline) string {
	h := sha256.New()
	w := bufio.NewWriter(h)
	var buf []byte
	for i := BeforeRecording; i < tl.Len(); i++ {
		s := tl.At(i)
		buf = buf[:0]
		for _, v := range []int64{s.Allocated, s.Requested, s.Active, s.Reserved} {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
		for m := range numMetrics {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(tl.Value(m, i)))
		}
		w.Write(buf)
	}
	for m := range numMetrics {
		fmt.Fprintf(w, "%+v\n", tl.Peak(m))
	}
	for k := range tl.NumAllocations() {
		start, free, end := tl.Lifetime(k)
		fmt.Fprintf(w, "%+v %d %d %d\n", tl.Allocation(k), start, free, end)
	}
	w.Flush()
	return fmt.Sprintf("%x", h.Sum(nil))
}

// checkSeriesSumAllocations checks the allocated, requested and active
// series against sums over the allocations live at each event, and each
// traced allocation against its alloc event.
func checkSeriesSumAllocations(t *testing.T, name string, tl *Timeline) {
	t.Helper()
	// delta[i+1] is the change at event i; delta[0] the initial values.
	delta := make([]Sample, tl.Len()+1)
	for k := range tl.NumAllocations() {
		a := tl.Allocation(k)
		if a.Origin == Traced {
			e := tl.Trace.At(int(a.Start))
			if a.Addr != e.Addr || a.Requested != e.Size || a.Stack != e.Stack || a.Stream != e.Stream {
				t.Errorf("%s device %d: allocation %d is %+v, its alloc event %+v", name, tl.Device, k, a, e)
			}
		}
		size, requested := int64(a.Size), int64(a.Requested)
		delta[a.Start+1].Active += size
		if a.End != LiveAtEnd {
			delta[a.End+1].Active -= size
		}
		if a.Free != BeforeRecording {
			delta[a.Start+1].Allocated += size
			delta[a.Start+1].Requested += requested
			if a.Free != LiveAtEnd {
				delta[a.Free+1].Allocated -= size
				delta[a.Free+1].Requested -= requested
			}
		}
	}
	var sum Sample
	for i := BeforeRecording; i < tl.Len(); i++ {
		sum.add(delta[i+1])
		got := tl.At(i)
		got.Reserved = 0
		if got != sum {
			t.Fatalf("%s device %d: event %d: series %+v, sums over the allocations %+v", name, tl.Device, i, got, sum)
		}
	}
}
