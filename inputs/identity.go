package inputs

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Identity is what a snapshot's path says about the process and the moment
// that wrote it. Each field is valid only when its Has flag is set: rank 0
// and "no rank in the name" are different things.
type Identity struct {
	// Tag is the file name's prefix before the rank or pid, e.g. "actor" in
	// actor_rank0_pid746.pickle; empty when the name has neither.
	Tag string

	Rank    int
	HasRank bool
	PID     int
	HasPID  bool

	// Step comes from a counter in the file name (…_step12.pickle) or,
	// failing that, in the nearest parent folder: step12, step_12,
	// global_step_12, req012, request-3, iter_000300, iteration7, epoch3.
	// StepUnit names what it counts ("step", "request", "iteration",
	// "epoch"), so that growth per step can say what a step is.
	Step     int
	StepUnit string
	HasStep  bool

	// Time comes from the nearest parent folder named as a timestamp, such as
	// verl's 20250601-1200 or 2025-06-01_12-00-00. It is read as UTC: the
	// folders carry no zone, and only the order matters.
	Time    time.Time
	HasTime bool
}

// snapshotExtensions are stripped, innermost last, before the name is
// parsed. Content, not the name, decides whether a file is a snapshot.
var snapshotExtensions = []string{".gz", ".zst", ".zstd", ".pickle", ".pkl", ".pk", ".pt"}

// Identity tokens are delimited by _ - . or the ends of the name, so that
// "rank" inside a word ("cranky3") does not match.
var (
	rankToken = regexp.MustCompile(`(?i)(?:^|[_.-])rank[_-]?(\d+)(?:$|[_.-])`)
	pidToken  = regexp.MustCompile(`(?i)(?:^|[_.-])pid[_-]?(\d+)(?:$|[_.-])`)
	stepToken = regexp.MustCompile(`(?i)(?:^|[_.-])` + counterWords + `[_-]?(\d+)(?:$|[_.-])`)
	stepDir   = regexp.MustCompile(`(?i)^` + counterWords + `[_-]?(\d+)$`)
)

// counterWords are the names of a step counter, the longer spelling of each
// word first; stepUnits maps each (lower case) to the unit it counts.
const counterWords = `(global_step|step|iteration|iter|request|req|epoch)`

var stepUnits = map[string]string{
	"global_step": "step", "step": "step",
	"iteration": "iteration", "iter": "iteration",
	"request": "request", "req": "request",
	"epoch": "epoch",
}

// setStep records a counter's word and digits in id; digits too many for
// an int leave it unset.
func (id *Identity) setStep(word, digits string) {
	if n, ok := atoi(digits); ok {
		id.Step, id.StepUnit, id.HasStep = n, stepUnits[strings.ToLower(word)], true
	}
}

// timestampLayouts are the folder names that samplers use for one dump
// round. verl's MemorySnapshotSampler writes %Y%m%d-%H%M.
var timestampLayouts = []string{
	"20060102-1504",
	"20060102-150405",
	"20060102_1504",
	"20060102_150405",
	"2006-01-02_15-04-05",
	"2006-01-02-15-04-05",
	"2006-01-02T15-04-05",
	"2006-01-02T15:04:05",
	"2006-01-02_15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02",
}

// ParseIdentity reads the identity from a path such as
// mem_snapshots/20250601-1200/actor_rank0_pid746.pickle.
func ParseIdentity(path string) Identity {
	var id Identity
	base := filepath.Base(path)
	for _, ext := range snapshotExtensions {
		if len(base) > len(ext) && strings.EqualFold(base[len(base)-len(ext):], ext) {
			base = base[:len(base)-len(ext)]
		}
	}

	tagEnd := len(base)
	if m := rankToken.FindStringSubmatchIndex(base); m != nil {
		id.Rank, id.HasRank = atoi(base[m[2]:m[3]])
		tagEnd = min(tagEnd, m[0])
	}
	if m := pidToken.FindStringSubmatchIndex(base); m != nil {
		id.PID, id.HasPID = atoi(base[m[2]:m[3]])
		tagEnd = min(tagEnd, m[0])
	}
	if m := stepToken.FindStringSubmatch(base); m != nil {
		id.setStep(m[1], m[2])
	}
	if id.HasRank || id.HasPID {
		id.Tag = base[:tagEnd]
	}

	// Walk up the parents; the nearest step or timestamp folder wins.
	for dir := filepath.Dir(path); ; {
		name := filepath.Base(dir)
		if !id.HasStep {
			if m := stepDir.FindStringSubmatch(name); m != nil {
				id.setStep(m[1], m[2])
			}
		}
		if !id.HasTime {
			id.Time, id.HasTime = parseTimestamp(name)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return id
}

func parseTimestamp(name string) (time.Time, bool) {
	for _, layout := range timestampLayouts {
		if len(name) != len(layout) {
			continue
		}
		if t, err := time.Parse(layout, name); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// atoi parses a decimal token; digits too many for an int make it invalid
// rather than wrong.
func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}
