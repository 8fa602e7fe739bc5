package analyze

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/inputs"
)

// processGroup is the inputs of one process.
type processGroup struct {
	id        string
	tags      []string
	rank, pid *int
	snaps     []*digest // in analysis order
	texts     []*textDigest
}

// processID is the process a snapshot input belongs to, as group sorts
// them: its rank and pid, or its file stem.
func processID(in inputs.Input) string {
	if id := identityID(in.Identity); id != "" {
		return id
	}
	return stem(in.Path)
}

// group sorts inputs into processes. A name with a rank or pid decides
// (rank and pid, not the tag: verl's actor and rollout dumps of one
// process carry different tags). Snapshots without one are grouped by file
// stem, so step2/snap.pickle and step3/snap.pickle are one process. A
// memory log without one joins the only process whose tag or stem starts
// its name, else the only process there is, else stands alone.
//
// Files of OOM messages are not processes: messages of different files
// are different processes unless the names, or the rank and pid of the
// messages' log prefixes, say they are one. A file without identity joins
// the snapshot process its name starts with, or the only snapshot process
// (the OOM message saved beside a snapshot dumped on OOM); else it stands
// alone, one process per rank or pid its prefixes name.
func group(snaps []*digest, texts []*textDigest) []*processGroup {
	// Inputs arrive in decoding order, which parallel decoding shuffles.
	snaps = slices.SortedFunc(slices.Values(snaps), func(a, b *digest) int { return cmp.Compare(a.in.Path, b.in.Path) })
	texts = slices.SortedStableFunc(slices.Values(texts), func(a, b *textDigest) int { return cmp.Compare(a.in.Path, b.in.Path) })

	byID := map[string]*processGroup{}
	var order []*processGroup
	getID := func(id string, in inputs.Input, rank, pid *int) *processGroup {
		g := byID[id]
		if g == nil {
			g = &processGroup{id: id, rank: rank, pid: pid}
			byID[id] = g
			order = append(order, g)
		}
		if in.Tag != "" && !slices.Contains(g.tags, in.Tag) {
			g.tags = append(g.tags, in.Tag)
		}
		return g
	}
	get := func(in inputs.Input) *processGroup {
		id := processID(in)
		var rank, pid *int
		if in.HasRank {
			rank = &in.Rank
		}
		if in.HasPID {
			pid = &in.PID
		}
		return getID(id, in, rank, pid)
	}
	for _, d := range snaps {
		g := get(d.in)
		g.snaps = append(g.snaps, d)
	}
	snapGroups := slices.Clone(order)
	var unnamed, unnamedOOMs []*textDigest
	for _, t := range texts {
		switch {
		case identityID(t.in.Identity) != "":
			g := get(t.in)
			g.texts = append(g.texts, t)
		case t.rank != nil && t.pid != nil:
			g := getID(fmt.Sprintf("rank%d/pid%d", *t.rank, *t.pid), t.in, t.rank, t.pid)
			g.texts = append(g.texts, t)
		case len(t.ooms) > 0:
			unnamedOOMs = append(unnamedOOMs, t)
		default:
			unnamed = append(unnamed, t)
		}
	}
	for _, t := range unnamed {
		g := matchByName(order, stem(t.in.Path), true)
		if g == nil {
			g = get(t.in)
		}
		g.texts = append(g.texts, t)
	}
	for _, t := range unnamedOOMs {
		g := matchByName(snapGroups, stem(t.in.Path), t.rank == nil && t.pid == nil)
		if g == nil {
			g = getID(oomFileID(t, byID), t.in, t.rank, t.pid)
		}
		g.texts = append(g.texts, t)
	}

	for _, g := range order {
		slices.SortStableFunc(g.snaps, compareSnapshots)
	}
	slices.SortStableFunc(order, compareGroups)
	return order
}

// matchByName picks the process a text file without identity belongs to:
// the one whose id or tag starts its name, else, with only, the only one.
func matchByName(groups []*processGroup, name string, only bool) *processGroup {
	var match *processGroup
	for _, g := range groups {
		prefixes := append([]string{g.id}, g.tags...)
		if slices.ContainsFunc(prefixes, func(p string) bool { return p != "" && strings.HasPrefix(name, p) }) {
			if match != nil {
				return nil // ambiguous: better alone than in the wrong process
			}
			match = g
		}
	}
	if match == nil && only && len(groups) == 1 {
		return groups[0]
	}
	return match
}

// oomFileID names the process of an OOM-message file without identity:
// its stem, with the rank or pid its prefixes name, made unique among the
// processes already named (a/oom.txt and b/oom.txt are two processes).
func oomFileID(t *textDigest, byID map[string]*processGroup) string {
	id := stem(t.in.Path)
	if t.rank != nil {
		id += fmt.Sprintf("/rank%d", *t.rank)
	}
	if t.pid != nil {
		id += fmt.Sprintf("/pid%d", *t.pid)
	}
	if g := byID[id]; g == nil || slices.ContainsFunc(g.texts, func(o *textDigest) bool { return o.in.Path == t.in.Path }) {
		return id
	}
	return filepath.ToSlash(t.in.Path) + strings.TrimPrefix(id, stem(t.in.Path))
}

// identityID names a process from its file names, or "" when they do not.
func identityID(id inputs.Identity) string {
	switch {
	case id.HasRank && id.HasPID:
		return fmt.Sprintf("rank%d/pid%d", id.Rank, id.PID)
	case id.HasPID:
		return fmt.Sprintf("pid%d", id.PID)
	case id.HasRank && id.Tag != "":
		return fmt.Sprintf("%s/rank%d", id.Tag, id.Rank)
	case id.HasRank:
		return fmt.Sprintf("rank%d", id.Rank)
	}
	return ""
}

// stemExtensions are stripped from a file name, innermost last, to get the
// name two snapshots of one process share.
var stemExtensions = []string{".gz", ".zst", ".zstd", ".pickle", ".pkl", ".pk", ".pt", ".csv", ".txt", ".log"}

func stem(path string) string {
	if path == inputs.Stdin {
		return "stdin"
	}
	base := filepath.Base(path)
	for _, ext := range stemExtensions {
		if len(base) > len(ext) && strings.EqualFold(base[len(base)-len(ext):], ext) {
			base = base[:len(base)-len(ext)]
		}
	}
	return base
}

// compareSnapshots orders one process's snapshots: by step, by dump-folder
// time, then by when their traces end (content, for names that say
// neither), then by path.
func compareSnapshots(a, b *digest) int {
	if c := inputs.CompareOptional(a.in.HasStep, b.in.HasStep, a.in.Step, b.in.Step); c != 0 {
		return c
	}
	if c := inputs.CompareOptional(a.in.HasTime, b.in.HasTime, a.in.Time.UnixNano(), b.in.Time.UnixNano()); c != 0 {
		return c
	}
	if c := inputs.CompareOptional(a.endUS != 0, b.endUS != 0, a.endUS, b.endUS); c != 0 {
		return c
	}
	return cmp.Compare(a.in.Path, b.in.Path)
}

// compareGroups lists processes by rank, then pid, then name.
func compareGroups(a, b *processGroup) int {
	rank := func(g *processGroup) (bool, int) { return g.rank != nil, deref(g.rank) }
	pid := func(g *processGroup) (bool, int) { return g.pid != nil, deref(g.pid) }
	ha, ra := rank(a)
	hb, rb := rank(b)
	if c := inputs.CompareOptional(ha, hb, ra, rb); c != 0 {
		return c
	}
	ha, ra = pid(a)
	hb, rb = pid(b)
	if c := inputs.CompareOptional(ha, hb, ra, rb); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
