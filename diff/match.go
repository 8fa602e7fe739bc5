package diff

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/inputs"
)

// Process is one process's snapshots in a run, in the order
// inputs.Expand gives them (step, dump time, rank).
type Process struct {
	// Name is how the process is named in the report: the tag and rank
	// its names carry ("actor/rank0"), else the tag, else the file name
	// without its extensions.
	Name string
	// Key matches the process across runs, where pids differ: Name,
	// unless the caller matches otherwise.
	Key string
	// Tag is the tag its names carry ("actor"), or "".
	Tag string
	// Rank is the rank the names carry, where HasRank says they do.
	Rank    int
	HasRank bool
	Inputs  []inputs.Input
}

// Processes groups a run's snapshot inputs into processes.
func Processes(ins []inputs.Input) []Process {
	var out []Process
	index := map[string]int{}
	for _, in := range ins {
		key := processKey(in)
		k, ok := index[key]
		if !ok {
			k = len(out)
			index[key] = k
			out = append(out, Process{Name: key, Key: key, Tag: in.Tag, Rank: in.Rank, HasRank: in.HasRank})
		}
		out[k].Inputs = append(out[k].Inputs, in)
	}
	return out
}

// processKey is the key of in's process.
func processKey(in inputs.Input) string {
	switch {
	case in.HasRank && in.Tag != "":
		return fmt.Sprintf("%s/rank%d", in.Tag, in.Rank)
	case in.HasRank:
		return fmt.Sprintf("rank%d", in.Rank)
	case in.Tag != "":
		return in.Tag
	}
	return stem(in.Path)
}

// stem is a file's name without its snapshot extensions.
func stem(path string) string {
	if path == inputs.Stdin {
		return "stdin"
	}
	base := filepath.Base(path)
	for _, ext := range []string{".gz", ".zst", ".zstd", ".pickle", ".pkl", ".pk", ".pt"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// Match pairs the processes of two runs: by key, then by rank among the
// rest (a run whose tag changed), then the last one of each if one is
// left on both sides (two single-process runs of differently named
// scripts). It returns the pairs in A's order and the names of the
// processes left alone, each with the run it belongs to.
func Match(a, b []Process) (pairs [][2]Process, unmatched []string) {
	usedB := make([]bool, len(b))
	matchedA := make([]bool, len(a))
	try := func(same func(pa, pb Process) bool) {
		for i, pa := range a {
			if matchedA[i] {
				continue
			}
			var found []int
			for j, pb := range b {
				if !usedB[j] && same(pa, pb) {
					found = append(found, j)
				}
			}
			if len(found) == 1 {
				matchedA[i], usedB[found[0]] = true, true
				pairs = append(pairs, [2]Process{pa, b[found[0]]})
			}
		}
	}
	try(func(pa, pb Process) bool { return pa.Key == pb.Key })
	try(func(pa, pb Process) bool { return pa.HasRank && pb.HasRank && pa.Rank == pb.Rank })
	left := func(used []bool) []int {
		var out []int
		for i, u := range used {
			if !u {
				out = append(out, i)
			}
		}
		return out
	}
	la, lb := left(matchedA), left(usedB)
	if len(la) == 1 && len(lb) == 1 {
		matchedA[la[0]], usedB[lb[0]] = true, true
		pairs = append(pairs, [2]Process{a[la[0]], b[lb[0]]})
		la, lb = nil, nil
	}
	for _, i := range la {
		unmatched = append(unmatched, "A: "+a[i].Name+" (no such process in B)")
	}
	for _, j := range lb {
		unmatched = append(unmatched, "B: "+b[j].Name+" (no such process in A)")
	}
	// In A's order, whichever pass matched them.
	pos := func(p Process) int { return slices.IndexFunc(a, func(x Process) bool { return x.Key == p.Key }) }
	slices.SortStableFunc(pairs, func(p, q [2]Process) int { return pos(p[0]) - pos(q[0]) })
	return pairs, unmatched
}

// Pick returns the snapshot of p to compare at m, and the step whose end it
// was dumped at (nil when its name carries none): at step N, the dump of
// step N where p's names carry it; otherwise the last snapshot, whose
// trace reaches furthest (and in which step N is then looked for).
func (p Process) Pick(m Moment) (inputs.Input, *int) {
	in := p.Inputs[len(p.Inputs)-1]
	if m.Kind == Step {
		if d, err := p.Dump(m.Step); err == nil {
			in = d
		}
	}
	if in.HasStep {
		return in, &in.Step
	}
	return in, nil
}

// Dump returns the snapshot of p dumped at the end of step n (the last
// one, when there are several).
func (p Process) Dump(n int) (inputs.Input, error) {
	for _, in := range slices.Backward(p.Inputs) {
		if in.HasStep && in.Step == n {
			return in, nil
		}
	}
	return inputs.Input{}, fmt.Errorf("%s: no snapshot of step %d (steps %s)", p.Name, n, p.steps())
}

// steps lists the steps p's names carry.
func (p Process) steps() string {
	var s []string
	for _, in := range p.Inputs {
		if in.HasStep {
			s = append(s, fmt.Sprint(in.Step))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(slices.Compact(s), ", ")
}
