package diagnose

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/vramscope/vramscope/snapshot"
)

// metadataStep finds a step number in a user_metadata string. Torch 2.10
// and 2.11 store whatever string the user set ("phase=train;step=3"); later
// versions may store compact JSON ({"step": 3}), so both "=" and ":" and an
// optional quote are accepted. The key must start a word, so that "substep"
// does not count.
var metadataStep = regexp.MustCompile(`(?i)(?:^|[^a-z0-9_])"?(step|iteration|iter|global_step)"?\s*[=:]\s*"?(\d+)`)

// stepsFromMetadata makes one step per distinct step number in the events'
// user_metadata, from its first to its last event. It reports false when
// no event carries a step number.
func stepsFromMetadata(sn *snapshot.Snapshot, tr snapshot.Trace) (Steps, bool) {
	type parsed struct {
		key string
		n   int
		ok  bool
	}
	cache := map[snapshot.StringID]parsed{} // few distinct strings, millions of events
	type span struct {
		key         string
		first, last int
	}
	spans := map[int]*span{}
	key := "" // the key of the first tagged event names the marker
	for i := range tr.Len() {
		md := tr.Context(i).UserMetadata
		if md == 0 {
			continue
		}
		p, seen := cache[md]
		if !seen {
			if m := metadataStep.FindStringSubmatch(sn.String(md)); m != nil {
				n, err := strconv.Atoi(m[2])
				p = parsed{key: m[1], n: n, ok: err == nil}
			}
			cache[md] = p
		}
		if !p.ok {
			continue
		}
		if key == "" {
			key = p.key
		}
		if s := spans[p.n]; s != nil {
			s.last = i
		} else {
			spans[p.n] = &span{key: p.key, first: i, last: i}
		}
	}
	if len(spans) == 0 {
		return Steps{}, false
	}
	steps := make([]Step, 0, len(spans))
	for n, s := range spans {
		start, end := spanTimes(tr, s.first, s.last+1)
		steps = append(steps, Step{
			Label: fmt.Sprintf("%s=%d", s.key, n), Source: SourceUserMetadata,
			First: s.first, End: s.last + 1, StartUS: start, EndUS: end,
		})
	}
	slices.SortFunc(steps, func(a, b Step) int { return cmp.Compare(a.First, b.First) })
	// Steps that interleave (tags set from several threads) are cut where
	// the next one starts, so that every event belongs to one step.
	for k := 1; k < len(steps); k++ {
		if p := &steps[k-1]; p.End > steps[k].First {
			p.End = steps[k].First
			p.StartUS, p.EndUS = spanTimes(tr, p.First, p.End)
		}
	}
	return Steps{
		Steps: steps, Source: SourceUserMetadata, Marker: key, Confidence: 1,
		Reason: fmt.Sprintf("%d distinct %s=N values in the events' user_metadata", len(steps), key),
	}, true
}
