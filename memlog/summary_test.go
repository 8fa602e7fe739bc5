package memlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/units"
)

// TestParseMemorySummariesGolden parses every table fixture into
// testdata/summary/<name>.json:
//
//   - seed003.txt: the real torch 2.x table from seed 003, verbatim;
//   - oom-handler.log: a full table printed by an OOM handler under
//     torchrun, every line prefixed "[rank1]: ", after the OOM message;
//   - abbreviated-old.txt: abbreviated=True, without the "Requested memory"
//     and oversize rows of newer releases.
func TestParseMemorySummariesGolden(t *testing.T) {
	for _, name := range []string{"seed003.txt", "oom-handler.log", "abbreviated-old.txt"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "summary", name)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseMemorySummaries(f)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(path, filepath.Ext(path))+".json", got)
		})
	}
}

// TestParseMemorySummariesValues pins the readings the golden files rely on,
// so a regenerated golden cannot quietly change their meaning.
func TestParseMemorySummariesValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "summary", "oom-handler.log"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMemorySummaries(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d tables, want 1", len(got))
	}
	s := got[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"title line", s.Line, 7},
		{"device", s.Device, 1},
		{"OOMs", s.OOMs, int64(1)},
		{"retries", s.AllocRetries, int64(3)},
		{"abbreviated", s.Abbreviated, false},
		{"missing", s.Missing, []string(nil)},
		{"allocated", s.Allocated.All, Sizes{72965 * units.MiB, 78489 * units.MiB, 4181 * units.GiB, 4110 * units.GiB}},
		{"allocated small pool", s.Allocated.SmallPool, Sizes{41 * units.MiB, 120 * units.MiB, 812 * units.GiB, 811 * units.GiB}},
		{"reserved large pool", s.Reserved.LargePool, Sizes{77293 * units.MiB, 78107 * units.MiB, 137216 * units.MiB, 59922 * units.MiB}},
		{"non-releasable", s.NonReleasable.All.Current, 4387 * units.MiB},
		{"allocations (K suffix)", s.Allocations.All, Counts{5153, 6116, 13333000, 13328000}},
		{"segments small pool", s.Segments.SmallPool, Counts{30, 66, 610, 580}},
		{"non-releasable allocs large pool", s.NonReleasableAllocs.LargePool, Counts{57, 131, 1298000, 1297000}},
		{"oversize segments", s.OversizeSegments, Counts{}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestParseMemorySummariesAbbreviatedOld(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "summary", "abbreviated-old.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ParseMemorySummaries(f)
	if err != nil {
		t.Fatal(err)
	}
	s := got[0]
	if !s.Abbreviated || s.Allocated.LargePool != (Sizes{}) {
		t.Errorf("Abbreviated = %v, LargePool = %v; want true and zero", s.Abbreviated, s.Allocated.LargePool)
	}
	want := []string{"Requested memory", "Oversize allocations", "Oversize GPU segments"}
	if !reflect.DeepEqual(s.Missing, want) {
		t.Errorf("Missing = %q, want %q", s.Missing, want)
	}
}

// TestParseMemorySummariesSeveral reads two tables from one log, the second
// cut off by the end of the input, as a log of a killed job would be.
func TestParseMemorySummariesSeveral(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "summary", "seed003.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	in := "step 10\n" + string(data) + "step 11\n" + strings.Join(lines[:12], "")
	got, err := ParseMemorySummaries(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d tables, want 2", len(got))
	}
	// Titles: line 3, and line 3 again after the first table and "step 11".
	if want := 3 + strings.Count(string(data), "\n") + 1; got[0].Line != 3 || got[1].Line != want {
		t.Errorf("title lines = %d, %d", got[0].Line, got[1].Line)
	}
	if got[1].Allocated != got[0].Allocated {
		t.Errorf("cut-off table: Allocated = %v, want %v", got[1].Allocated, got[0].Allocated)
	}
	if len(got[1].Missing) != 9 {
		t.Errorf("cut-off table: Missing = %q, want all rows but Allocated and Active memory", got[1].Missing)
	}
}

func TestParseMemorySummariesErrors(t *testing.T) {
	const title = "|    PyTorch CUDA memory summary, device ID 0    |\n"
	const header = "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
	tests := []struct {
		name, in, want string
		unrecognized   bool
	}{
		{"empty", "", "no memory_summary table: unrecognized format", true},
		{"OOM message only", "CUDA out of memory. Tried to allocate 2.00 MiB.", "no memory_summary table: unrecognized format", true},
		{"bad size", title + header + "| Allocated memory      |  12 MiB |  12 MiB |  12 parsecs | 0 B |\n",
			`memory summary line 3: Allocated memory: parsing size "12 parsecs": unknown unit "parsecs": not a size`, false},
		{"bad count", title + header + "| Allocations           |  12 |  12 |  12 X | 0 |\n",
			`memory summary line 3: Allocations: bad count "12 X"`, false},
		{"short row", title + header + "| Allocations           |  12 |  12 |\n",
			"memory summary line 3: want a name and 4 columns, got 3 cells", false},
		{"counters", title + "|  CUDA OOMs: x  |  cudaMalloc retries: 0 |\n",
			`memory summary line 2: no "CUDA OOMs: *(\\d+)" in counters line`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMemorySummaries(strings.NewReader(tt.in))
			if err == nil || err.Error() != tt.want || errors.Is(err, ErrUnrecognized) != tt.unrecognized {
				t.Errorf("error = %v, want %q (unrecognized: %v)", err, tt.want, tt.unrecognized)
			}
		})
	}
}
