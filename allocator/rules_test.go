package allocator

import "testing"

const MiB = 1 << 20

func TestRound(t *testing.T) {
	d4, err := Parse("roundup_power2_divisions:4")
	if err != nil {
		t.Fatal(err)
	}
	list, err := Parse("roundup_power2_divisions:[2:1,256:8,>:2]")
	if err != nil {
		t.Fatal(err)
	}
	def := Defaults()
	for _, tc := range []struct {
		name string
		s    *Settings
		n    uint64
		want uint64
	}{
		{"tiny", &def, 1, 512},
		{"512 multiple", &def, 1536, 1536},
		{"1200 B, no divisions", &def, 1200, 1536},
		{"1200 B, 4 divisions: small sizes are never divided", &d4, 1200, 1536},
		{"5 MiB stays", &d4, 5 * MiB, 5 * MiB},
		{"5 MiB + 1", &d4, 5*MiB + 1, 6 * MiB},
		{"power of two stays", &d4, 8 * MiB, 8 * MiB},
		{"300 MiB, 8 divisions", &list, 300 * MiB, 320 * MiB},
		{"first entry fills below: 3 MiB, 1 division", &list, 3*MiB + 1, 3*MiB + 512},
		{"> after the last: 2 GiB + 1, 2 divisions", &list, 2<<30 + 1, 3 << 30},
	} {
		if got := tc.s.Round(tc.n); got != tc.want {
			t.Errorf("%s: Round(%d) = %d, want %d", tc.name, tc.n, got, tc.want)
		}
	}
}

func TestSegmentSize(t *testing.T) {
	for _, tc := range []struct {
		rounded uint64
		pool    Pool
		want    uint64
	}{
		{512, Small, 2 * MiB},
		{MiB, Small, 2 * MiB},
		{MiB + 512, Large, 20 * MiB},
		{10*MiB - 512, Large, 20 * MiB},
		{10 * MiB, Large, 10 * MiB},
		{25 * MiB, Large, 26 * MiB},
		{600 * MiB, Large, 600 * MiB},
	} {
		if got := PoolOf(tc.rounded); got != tc.pool {
			t.Errorf("PoolOf(%d) = %v, want %v", tc.rounded, got, tc.pool)
		}
		if got := SegmentSize(tc.rounded); got != tc.want {
			t.Errorf("SegmentSize(%d) = %d, want %d", tc.rounded, got, tc.want)
		}
	}
	s, err := Parse("large_segment_size_mb:64")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SegmentSize(2 * MiB); got != 64*MiB {
		t.Errorf("large_segment_size_mb:64: SegmentSize(2 MiB) = %d, want 64 MiB", got)
	}
	def := Defaults()
	for _, tc := range []struct {
		s    *Settings
		pool Pool
		want uint64
	}{{&def, Small, 2 * MiB}, {&def, Large, 20 * MiB}, {&s, Small, 2 * MiB}, {&s, Large, 64 * MiB}} {
		if got := tc.s.PageSize(tc.pool); got != tc.want {
			t.Errorf("%v: PageSize(%v) = %d, want %d", tc.s, tc.pool, got, tc.want)
		}
	}
}

func TestShouldSplit(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		pool                     Pool
		expandable               bool
		rounded, block, maxSplit uint64
		want                     bool
	}{
		{"small, 512 B left", Small, false, 512, 1024, Unlimited, true},
		{"large, exactly 1 MiB left: kept whole", Large, false, 25 * MiB, 26 * MiB, Unlimited, false},
		{"large, more than 1 MiB left", Large, false, 2 * MiB, 20 * MiB, Unlimited, true},
		{"large, oversize request", Large, false, 200 * MiB, 250 * MiB, 128 * MiB, false},
		{"expandable, 512 B left", Large, true, 25 * MiB, 25*MiB + 512, Unlimited, true},
		{"no remainder", Large, false, 20 * MiB, 20 * MiB, Unlimited, false},
	} {
		if got := ShouldSplit(tc.pool, tc.expandable, tc.rounded, tc.block, tc.maxSplit); got != tc.want {
			t.Errorf("%s: ShouldSplit = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	s, err := Parse("expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.8")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Expandable || s.MaxSplit != 128*MiB || s.GCThreshold != 0.8 {
		t.Errorf("parsed %+v", s)
	}
	if got := s.String(); got != "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.8" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{
		"max_split_size_mb:10",           // below the 20 MiB large segment
		"garbage_collection_threshold:1", // must be < 1
		"roundup_power2_divisions:3",     // not a power of two
		"roundup_power2_divisions:[3:2]", // interval not a power of two
		"expandable_segments",            // no value
		"no_such_key:1",
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}
