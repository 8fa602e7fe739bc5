package allocsim

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/snapshot"
)

// Candidate is one fix to try: settings over the recorded ones, and
// whether empty_cache() is called at the end of each step.
type Candidate struct {
	Name            string
	Set             []string // KEY:VALUE pairs of PYTORCH_CUDA_ALLOC_CONF
	EmptyCacheSteps bool
}

// Candidates are the fixes --recommend tries: expandable segments,
// empty_cache() at step ends (when the trace has steps), a few
// max_split_size_mb and garbage_collection_threshold values (the latter
// only act under a memory cap) and roundup_power2_divisions.
func Candidates(hasSteps, hasLimit bool) []Candidate {
	cs := []Candidate{
		{Name: "expandable_segments:True", Set: []string{"expandable_segments:True"}},
	}
	if hasSteps {
		cs = append(cs,
			Candidate{Name: "empty_cache() at step ends", EmptyCacheSteps: true},
			Candidate{Name: "expandable_segments:True + empty_cache() at step ends", Set: []string{"expandable_segments:True"}, EmptyCacheSteps: true})
	}
	for _, mb := range []int{64, 128, 512} {
		kv := fmt.Sprintf("max_split_size_mb:%d", mb)
		cs = append(cs, Candidate{Name: kv, Set: []string{kv}})
	}
	if hasLimit {
		for _, f := range []string{"0.6", "0.8"} {
			kv := "garbage_collection_threshold:" + f
			cs = append(cs, Candidate{Name: kv, Set: []string{kv}})
		}
	}
	for _, d := range []int{4, 8} {
		kv := fmt.Sprintf("roundup_power2_divisions:%d", d)
		cs = append(cs, Candidate{Name: kv, Set: []string{kv}})
	}
	return cs
}

// Outcome is a candidate's simulated run.
type Outcome struct {
	Candidate
	Settings allocator.Settings
	Result   *Result
	Err      error
	// Worse: an OOM where the baseline had none (or an earlier one), or
	// a higher reserved peak where neither runs out of memory.
	Worse bool
}

// Recommend simulates the recorded settings (the baseline) and every
// candidate on top of them under cfg, all at once, one goroutine each,
// and ranks the candidates: those that avoid an OOM first, then by
// reserved peak. stepEnds are the trace indices where a step ends.
func Recommend(sn *snapshot.Snapshot, rec *Recorded, cfg Config, stepEnds []int, cands []Candidate) (*Result, []Outcome, error) {
	out := make([]Outcome, len(cands))
	var (
		baseline *Result
		baseErr  error
		wg       sync.WaitGroup
	)
	wg.Go(func() { baseline, baseErr = Run(sn, rec, rec.Settings, cfg) })
	for i, c := range cands {
		wg.Go(func() {
			o := Outcome{Candidate: c, Settings: rec.Settings}
			defer func() { out[i] = o }()
			for _, kv := range c.Set {
				if o.Err = o.Settings.SetPair(kv); o.Err != nil {
					return
				}
			}
			ccfg := cfg
			if c.EmptyCacheSteps {
				ccfg.EmptyCacheAt = slices.Concat(cfg.EmptyCacheAt, stepEnds)
			}
			o.Result, o.Err = Run(sn, rec, o.Settings, ccfg)
		})
	}
	wg.Wait()
	if baseErr != nil {
		return nil, nil, fmt.Errorf("baseline: %w", baseErr)
	}
	for i := range out {
		if out[i].Err == nil {
			out[i].Worse = worse(out[i].Result, baseline)
		}
	}
	slices.SortStableFunc(out, func(a, b Outcome) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if a.Err != nil || b.Err != nil {
			return 0
		}
		return cmp.Compare(a.Result.MaxReserved, b.Result.MaxReserved)
	})
	return baseline, out, nil
}

// worse: r runs out of memory where the baseline did not, or sooner, or
// reserves more where neither does.
func worse(r, baseline *Result) bool {
	switch {
	case baseline.OOM != nil:
		return r.OOM != nil && r.OOM.Event < baseline.OOM.Event
	case r.OOM != nil:
		return true
	}
	return r.MaxReserved > baseline.MaxReserved
}

func rank(o Outcome) int {
	switch {
	case o.Err != nil:
		return 2
	case o.Result.OOM != nil:
		return 1
	}
	return 0
}
