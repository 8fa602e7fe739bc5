// Command tracecores reads a runtime execution trace (bench/phases -trace)
// and prints how many cores were busy over time and on what: a row per
// time slice with the busy cores and the goroutine groups that ran most in
// it, then each group's span and running time. A goroutine's group is the
// function that started it, with the function of ours that created it:
// the stages of a split decode and of the replay's pipeline each show as
// one. Where a slice has fewer busy cores than the process may use, a stage
// holds the rest back. With -each every goroutine is a group of its own
// (its name then ends in its id): the shards of a split stage apart.
//
//	go run ./bench/tracecores [-slice 20ms] [-each] t.out
package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	slice := flag.Duration("slice", 20*time.Millisecond, "length of a row's time slice")
	each := flag.Bool("each", false, "a group per goroutine")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracecores [-slice D] [-each] TRACE")
		os.Exit(1)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	tl, err := read(f, *each)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", flag.Arg(0), err)
		os.Exit(2)
	}
	tl.print(os.Stdout, *slice)
}

// span is one stretch of a goroutine's running (or in a system call).
type span struct {
	group      int
	start, end trace.Time
}

// region is a user region (bench/phases' phases).
type region struct {
	name       string
	start, end trace.Time
}

type timeline struct {
	t0, t1  trace.Time
	groups  []string
	spans   []span
	regions []region
}

// read reads the trace in r; with each, a goroutine is a group of its own.
func read(r io.Reader, each bool) (*timeline, error) {
	rd, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	tl := &timeline{t0: -1}
	groupOf := map[string]int{}
	goGroup := map[trace.GoID]int{}
	running := map[trace.GoID]trace.Time{}
	type openRegion struct {
		g    trace.GoID
		name string
	}
	open := map[openRegion]trace.Time{}
	group := func(name string) int {
		g, ok := groupOf[name]
		if !ok {
			g = len(tl.groups)
			groupOf[name] = g
			tl.groups = append(tl.groups, name)
		}
		return g
	}
	for {
		e, err := rd.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		now := e.Time()
		if tl.t0 < 0 {
			tl.t0 = now
		}
		tl.t1 = now
		switch e.Kind() {
		case trace.EventRegionBegin:
			open[openRegion{e.Goroutine(), e.Region().Type}] = now
		case trace.EventRegionEnd:
			k := openRegion{e.Goroutine(), e.Region().Type}
			if t, ok := open[k]; ok {
				tl.regions = append(tl.regions, region{k.name, t, now})
				delete(open, k)
			}
		case trace.EventStateTransition:
			st := e.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if from == trace.GoNotExist || from == trace.GoUndetermined {
				if _, ok := goGroup[id]; !ok {
					n := name(st.Stack, e.Stack())
					if each {
						n += fmt.Sprintf(" #%d", id)
					}
					goGroup[id] = group(n)
				}
			}
			if !from.Executing() && to.Executing() {
				running[id] = now
			} else if from.Executing() && !to.Executing() {
				if t, ok := running[id]; ok {
					tl.spans = append(tl.spans, span{goGroup[id], t, now})
					delete(running, id)
				}
			}
		}
	}
	for id, t := range running {
		tl.spans = append(tl.spans, span{goGroup[id], t, tl.t1})
	}
	return tl, nil
}

// name names a goroutine by the function it started in and the innermost
// function of this module on the stack that created it, where there is
// one. A goroutine that was running when the trace started has no start
// recorded: the main goroutine among them.
func name(start, creator trace.Stack) string {
	var fn string
	for f := range start.Frames() {
		fn = short(f.Func) // the outermost frame: where it started
	}
	if fn == "" {
		fn = "(running before the trace)"
	}
	for f := range creator.Frames() {
		if strings.Contains(f.Func, "vramscope/") {
			return short(f.Func) + " > " + fn
		}
	}
	return fn
}

// short drops a function name's module path.
func short(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// print writes the three tables: the regions, the busy cores per slice,
// the groups.
func (tl *timeline) print(w io.Writer, slice time.Duration) {
	fmt.Fprintf(w, "trace: %.0f ms, %d goroutine groups\n\n", tl.ms(tl.t1), len(tl.groups))
	tl.printRegions(w)
	tl.printSlices(w, slice)
	tl.printGroups(w)
}

// ms is t in milliseconds from the trace's start.
func (tl *timeline) ms(t trace.Time) float64 { return float64(t-tl.t0) / 1e6 }

// printRegions writes the regions by name: how many, from the first's
// start to the last's end, and their time in all.
func (tl *timeline) printRegions(w io.Writer) {
	type regions struct {
		n                 int
		start, end, total trace.Time
	}
	var names []string
	byName := map[string]*regions{}
	for _, r := range tl.regions {
		rs := byName[r.name]
		if rs == nil {
			rs = &regions{start: r.start}
			byName[r.name] = rs
			names = append(names, r.name)
		}
		rs.n++
		rs.start, rs.end = min(rs.start, r.start), max(rs.end, r.end)
		rs.total += r.end - r.start
	}
	fmt.Fprintf(w, "| region | count | from ms | to ms | in all ms |\n|---|---:|---:|---:|---:|\n")
	for _, name := range names {
		rs := byName[name]
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f |\n", name, rs.n, tl.ms(rs.start), tl.ms(rs.end), float64(rs.total)/1e6)
	}
}

// printSlices writes, per slice, the cores busy in it and the three groups
// that ran most.
func (tl *timeline) printSlices(w io.Writer, slice time.Duration) {
	busy := make([][]float64, int((tl.t1-tl.t0)/trace.Time(slice))+1) // slice, group: running ns
	for i := range busy {
		busy[i] = make([]float64, len(tl.groups))
	}
	for _, s := range tl.spans {
		for t := s.start; t < s.end; {
			i := int((t - tl.t0) / trace.Time(slice))
			end := min(s.end, tl.t0+trace.Time(i+1)*trace.Time(slice))
			busy[i][s.group] += float64(end - t)
			t = end
		}
	}
	fmt.Fprintf(w, "\n| ms | busy cores | what ran most |\n|---:|---:|---|\n")
	for i, b := range busy {
		var sum float64
		var ran []int
		for g, v := range b {
			sum += v
			if v > 0 {
				ran = append(ran, g)
			}
		}
		slices.SortFunc(ran, func(x, y int) int { return cmp.Compare(b[y], b[x]) })
		var what []string
		for _, g := range ran[:min(3, len(ran))] {
			what = append(what, fmt.Sprintf("%s %.1f", tl.groups[g], b[g]/float64(slice)))
		}
		fmt.Fprintf(w, "| %.0f | %.1f | %s |\n", float64(i)*float64(slice)/1e6, sum/float64(slice), strings.Join(what, "; "))
	}
}

// printGroups writes each group that ran a millisecond or more, by when it
// first ran: its first and last running moment and its running time.
func (tl *timeline) printGroups(w io.Writer) {
	ran := make([]bool, len(tl.groups))
	total := make([]trace.Time, len(tl.groups))
	first := make([]trace.Time, len(tl.groups))
	last := make([]trace.Time, len(tl.groups))
	for _, s := range tl.spans {
		g := s.group
		if !ran[g] || s.start < first[g] {
			first[g] = s.start
		}
		ran[g] = true
		total[g] += s.end - s.start
		last[g] = max(last[g], s.end)
	}
	var order []int
	for g := range tl.groups {
		if total[g] >= 1e6 {
			order = append(order, g)
		}
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(first[x], first[y]) })
	fmt.Fprintf(w, "\n| group | first ms | last ms | running ms |\n|---|---:|---:|---:|\n")
	for _, g := range order {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f |\n", tl.groups[g], tl.ms(first[g]), tl.ms(last[g]), float64(total[g])/1e6)
	}
}
