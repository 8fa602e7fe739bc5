package allocsim

import (
	"fmt"

	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
)

// Advice is the best candidate fix for one device, with the numbers that
// back it, for the fragmentation and OOM advice of analyze and explain.
type Advice struct {
	Baseline *Result // the recorded settings, replayed
	Best     Outcome
	// Sentence says it: "with expandable_segments:True the reserved peak
	// would have been 560.00 MiB instead of 1.13 GiB", or "with ... the OOM
	// at event 34 would not have happened: the reserved peak would have
	// been 2.50 GiB under the 3.09 GiB cap".
	Sentence string
}

// Advise tries the candidate fixes on device's trace (stepEnds: where
// steps end, for empty_cache() at step ends) and returns the best one that
// lowers the reserved peak or avoids the OOM; nil when none does.
func Advise(sn *snapshot.Snapshot, device int, stepEnds []int) (*Advice, error) {
	rec, err := Record(sn, device)
	if err != nil {
		return nil, err
	}
	cfg := Config{Limit: rec.Limit, Capacity: rec.Capacity, Initial: rec.Initial}
	base, outs, err := Recommend(sn, rec, cfg, stepEnds, Candidates(len(stepEnds) > 0, cfg.Limit > 0))
	if err != nil {
		return nil, err
	}
	// A setting that runs out of memory is no advice, even when it gets
	// less far (a lower peak) than the baseline.
	best := outs[0]
	if best.Err != nil || best.Result.OOM != nil || base.OOM == nil && best.Result.MaxReserved >= base.MaxReserved {
		return nil, nil
	}
	a := &Advice{Baseline: base, Best: best}
	if base.OOM != nil {
		a.Sentence = fmt.Sprintf("with %s the OOM at event %d would not have happened: the reserved peak would have been %s", best.Name, base.OOM.Event, units.Bytes(best.Result.MaxReserved))
		if cfg.Limit > 0 {
			a.Sentence += fmt.Sprintf(" under the %s cap", units.Bytes(cfg.Limit))
		}
	} else {
		a.Sentence = fmt.Sprintf("with %s the reserved peak would have been %s instead of %s", best.Name,
			units.Bytes(best.Result.MaxReserved), units.Bytes(base.MaxReserved))
	}
	return a, nil
}
