package main

import (
	"bytes"
	"context"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"
)

// spin keeps a core busy for d.
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// stage starts two goroutines that each keep a core busy for d, as a
// pipeline stage does, and waits for them.
func stage(d time.Duration) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { spin(d) })
	}
	wg.Wait()
}

// A trace of a region in which two goroutines, started by a function of
// this module, keep two cores busy reads back as that region, that group
// and about that running time; with -each, as two groups.
func TestRead(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: spins two cores for 100 ms; the full go test ./... (.ci/run) runs it")
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	trace.WithRegion(context.Background(), "stage", func() { stage(50 * time.Millisecond) })
	trace.Stop()

	raw := buf.Bytes()
	tl, err := read(bytes.NewReader(raw), false)
	if err != nil {
		t.Fatal(err)
	}
	var regions []string
	for _, r := range tl.regions {
		regions = append(regions, r.name)
		if d := time.Duration(r.end - r.start); d < 50*time.Millisecond {
			t.Errorf("region %s lasted %v, want at least the 50 ms it spun", r.name, d)
		}
	}
	if len(regions) != 1 || regions[0] != "stage" {
		t.Errorf("regions %q, want [stage]", regions)
	}
	const want = "tracecores.stage > sync.(*WaitGroup).Go.func1"
	var running time.Duration
	for _, s := range tl.spans {
		if tl.groups[s.group] == want {
			running += time.Duration(s.end - s.start)
		}
	}
	// Two goroutines spinning 50 ms each: 100 ms, less what the machine
	// lent elsewhere (a 2-core CI machine) but not less than one core's.
	if running < 50*time.Millisecond || running > 150*time.Millisecond {
		t.Errorf("group %q ran %v, want about 100 ms; groups: %q", want, running, tl.groups)
	}

	var out strings.Builder
	tl.print(&out, 20*time.Millisecond)
	if !strings.Contains(out.String(), "| stage | 1 |") || !strings.Contains(out.String(), want) {
		t.Errorf("printed:\n%s", out.String())
	}

	each, err := read(bytes.NewReader(raw), true)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range each.groups {
		if strings.HasPrefix(g, want+" #") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("with each, %d groups named %q #id, want 2: %q", n, want, each.groups)
	}
}
