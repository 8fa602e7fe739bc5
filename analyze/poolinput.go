package analyze

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/pools"
)

// A serving engine's log (package pools) is a text input like a memory
// log: its pool findings join the findings of the process it belongs to.
// They are never merged into a snapshot's leak: a pool leak is slots an
// engine hands out inside tensors it allocated once, which no CUDA memory
// tool sees, so the two say different things.

// AddServingLog adds the pool stats and idle checks of one serving log.
func (a *Analyzer) AddServingLog(in inputs.Input, l *pools.Log) {
	a.addText(servingDigest(in, l))
}

func servingDigest(in inputs.Input, l *pools.Log) *textDigest {
	t := &textDigest{in: in, kind: "serving log"}
	leaks, notes := pools.Judge(l)
	for _, n := range notes {
		t.notes = append(t.notes, fmt.Sprintf("%s: %s", in, n))
	}
	if l.Unparsed > 0 {
		t.notes = append(t.notes, fmt.Sprintf("%s: %d of %d lines look like pool stats but could not be read (first: %s)",
			in, l.Unparsed, l.Lines, l.FirstUnparsed))
	}
	for _, lk := range leaks {
		t.pools = append(t.pools, poolFinding(in, l, lk))
	}
	return t
}

// poolFinding words one pool leak. Its numbers count the pool's own unit
// (tokens, request slots), not bytes: Bytes stays 0.
func poolFinding(in inputs.Input, l *pools.Log, lk pools.Leak) diagnose.Finding {
	frac := float64(lk.Leaked) / float64(max(lk.Capacity, 1))
	ev := map[string]any{
		"pool":            lk.Pool,
		"engine":          string(lk.Engine),
		"unit":            lk.Unit,
		"capacity":        lk.Capacity,
		"leaked_tokens":   lk.Leaked,
		"leaked_fraction": round2(frac),
		"source":          in.String(),
		"samples":         len(l.Samples),
		"callsite_reason": "a serving log counts pool slots, not stacks: record a pool ledger (vramscope_hook.pool) to name the code",
	}
	if lk.Rank != "" {
		ev["rank"] = lk.Rank
	}
	// Without a trend the only time known is the idle check's.
	at := "onset"
	if lk.Trend == nil {
		at = "idle_check_at"
	}
	if l.HasTime {
		ev[at] = lk.OnsetTime.Format(l.Layout)
	} else {
		ev[at+"_line"] = int(lk.Onset)
	}
	sev := diagnose.Medium
	title := fmt.Sprintf("%s %s pool leaks: %d of %d %s (%.0f%%) held by no request", lk.Engine, lk.Pool, lk.Leaked, lk.Capacity, lk.Unit, 100*frac)
	if tr := lk.Trend; tr != nil {
		per := "hour"
		if !l.HasTime {
			per = "line"
		}
		ev["growth_per_"+per] = int64(math.Round(tr.PerStep))
		ev["steadiness"] = round2(tr.Steadiness)
		ev["floors"] = len(lk.Floors)
		ev["floor_at_running_requests"] = lk.Level
		title = fmt.Sprintf("%s %s pool: the floor of used %s at low load climbs %d per %s; %d (%.0f%% of the pool) never come back",
			lk.Engine, lk.Pool, lk.Unit, int64(math.Round(tr.PerStep)), per, lk.Leaked, 100*frac)
	}
	if lk.RequestsPerMinute >= 0 {
		ev["requests_per_minute_at_onset"] = lk.RequestsPerMinute
	}
	if lk.HoursLeft >= 0 {
		ev["hours_to_exhaustion"] = math.Round(lk.HoursLeft*10) / 10
	}
	if c := lk.Idle; c != nil {
		ev["idle_check"] = c.Explain()
		ev["idle_check_line"] = c.Line
		if c.Protected > 0 {
			ev["protected_tokens"] = c.Protected
		}
	}
	if lk.Idle != nil || frac >= 0.2 || (lk.HoursLeft >= 0 && lk.HoursLeft < 24) {
		sev = diagnose.High
	}
	return diagnose.Finding{
		Kind:     diagnose.KindLeak,
		Severity: sev,
		Title:    title,
		Stack:    []diagnose.Frame{},
		Evidence: ev,
		Fix:      lk.Causes(),
	}
}
