package analyze

import (
	"fmt"
	"github.com/vramscope/vramscope/pools"

	"github.com/vramscope/vramscope/diagnose"
	"strings"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/memlog"
)

// textDigest is a memory log, a file of memory_summary() tables or the
// OOM messages of one process in one file.
type textDigest struct {
	in     inputs.Input
	kind   string
	points []logPoint
	ooms   []memlog.OOMMessage
	notes  []string
	// rank and pid are what the messages' log prefixes say ("[rank3]:",
	// "(WorkerDict pid=2917)"), when the file name says neither.
	rank, pid *int
	// pools are a serving log's pool findings (poolinput.go), poolCharts
	// the series they are about.
	pools      []diagnose.Finding
	poolCharts []pools.Chart
}

// oomDigests splits one file's OOM messages by the process their log
// prefixes name: a torchrun log interleaves every rank's.
func oomDigests(in inputs.Input, msgs []memlog.OOMMessage) []*textDigest {
	var out []*textDigest
	byKey := map[[2]int]*textDigest{}
	for _, m := range msgs {
		key := [2]int{-1, -1}
		if m.Rank != nil {
			key[0] = *m.Rank
		}
		if m.PID != nil {
			key[1] = *m.PID
		}
		t := byKey[key]
		if t == nil {
			t = &textDigest{in: in, kind: "OOM message", rank: m.Rank, pid: m.PID}
			byKey[key] = t
			out = append(out, t)
		}
		t.ooms = append(t.ooms, m)
	}
	return out
}

// logPoint is one sample of a memory log or one summary table.
type logPoint struct {
	allocated, reserved int64
	// peak is the table's peak allocated bytes since start or since the
	// last reset; 0 when the sample has no table.
	peak int64
	// cudaOOMs counts the OutOfMemoryErrors raised so far.
	cudaOOMs int64
	// nonReleasable is free memory inside segments that hold live blocks,
	// which empty_cache() cannot return.
	nonReleasable int64
}

func logDigest(in inputs.Input, s *memlog.Series) *textDigest {
	t := &textDigest{in: in, kind: "memory log"}
	for _, smp := range s.Samples {
		p := logPoint{allocated: int64(smp.Allocated), reserved: int64(smp.Reserved)}
		if smp.Summary != "" {
			// A summary that does not parse only costs the peak: the
			// columns already carry allocated and reserved.
			if sums, err := memlog.ParseMemorySummaries(strings.NewReader(smp.Summary)); err == nil && len(sums) > 0 {
				p.peak = int64(sums[0].Allocated.All.Peak)
				p.cudaOOMs = sums[0].OOMs
				p.nonReleasable = int64(sums[0].NonReleasable.All.Current)
			}
		}
		t.points = append(t.points, p)
	}
	if n := len(s.Warnings); n > 0 {
		t.notes = append(t.notes, fmt.Sprintf("%s: %d unreadable rows skipped (first: %v)", in, n, s.Warnings[0]))
	}
	return t
}

func summaryDigest(in inputs.Input, sums []memlog.MemorySummary) *textDigest {
	t := &textDigest{in: in, kind: "memory_summary dump"}
	for _, s := range sums {
		t.points = append(t.points, logPoint{
			allocated:     int64(s.Allocated.All.Current),
			reserved:      int64(s.Reserved.All.Current),
			peak:          int64(s.Allocated.All.Peak),
			cudaOOMs:      s.OOMs,
			nonReleasable: int64(s.NonReleasable.All.Current),
		})
	}
	return t
}
