package analyze

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/pools"
	"github.com/vramscope/vramscope/pools/ledger"
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
		if c, ok := poolChart(in, l, lk); ok {
			t.poolCharts = append(t.poolCharts, c)
		}
	}
	return t
}

// chartBuckets is how many points a pool's chart has: about one per
// pixel of the report's chart at half width.
const chartBuckets = 600

// poolChart charts the series a token-pool leak is about: its rank's, or
// for an idle check, which names no rank, the log's first.
func poolChart(in inputs.Input, l *pools.Log, lk pools.Leak) (pools.Chart, bool) {
	if lk.Pool == "req_to_token_pool" || len(l.Series) == 0 {
		return pools.Chart{}, false
	}
	sr := l.Series[0]
	for _, s := range l.Series {
		if s.Rank == lk.Rank {
			sr = s
		}
	}
	return l.ChartOf(in.String(), sr, &lk, chartBuckets), true
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
		"samples":         l.NumSamples(),
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
	pool := fmt.Sprintf("%s %s pool", lk.Engine, lk.Pool)
	if lk.Rank != "" {
		pool += " (" + lk.Rank + ")" // several ranks, several pools
	}
	title := fmt.Sprintf("%s leaks: %d of %d %s (%.0f%%) held by no request", pool, lk.Leaked, lk.Capacity, lk.Unit, 100*frac)
	if tr := lk.Trend; tr != nil {
		per := "hour"
		if !l.HasTime {
			per = "line"
		}
		ev["growth_per_"+per] = int64(math.Round(tr.PerStep))
		ev["steadiness"] = round2(tr.Steadiness)
		ev["floors"] = len(lk.Floors)
		ev["floor_at_running_requests"] = lk.Level
		title = fmt.Sprintf("%s: the floor of used %s at low load climbs %d per %s; %d (%.0f%% of the pool) never come back",
			pool, lk.Unit, int64(math.Round(tr.PerStep)), per, lk.Leaked, 100*frac)
		ev["floor_growth"] = "steady"
		if lk.Stepped {
			title = fmt.Sprintf("%s: the floor of used %s at low load steps up and never comes back down; %d (%.0f%% of the pool) held by no request",
				pool, lk.Unit, lk.Leaked, 100*frac)
			ev["floor_growth"] = "steps"
		}
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

// AddPoolLedger adds the ledger of a pool the program recorded itself
// (vramscope_hook.pool): what it still held at idle moments and at the
// end, named by the allocating stack.
func (a *Analyzer) AddPoolLedger(in inputs.Input, l *ledger.Ledger) {
	t := &textDigest{in: in, kind: "pool ledger"}
	if l.Unparsed > 0 {
		t.notes = append(t.notes, fmt.Sprintf("%s: %d of %d records could not be read (first: %s)", in, l.Unparsed, l.Lines, l.FirstUnparsed))
	}
	if f, ok := ledgerFinding(in, l); ok {
		t.pools = append(t.pools, f)
	}
	a.addText(t)
}

// maxListed bounds the stacks and owners a ledger finding lists.
const maxListed = 10

// ledgerFinding reports what an idle moment found held (a leak: nothing
// should be), else what the end found held (a leak or requests in flight
// when the program stopped).
func ledgerFinding(in inputs.Input, l *ledger.Ledger) (diagnose.Finding, bool) {
	held, when, sev := l.AtIdle, "at an idle moment", diagnose.High
	if len(held) == 0 {
		held, when, sev = l.End, "at the end", diagnose.Medium
	}
	if len(held) == 0 {
		return diagnose.Finding{}, false
	}
	var n int64
	for _, h := range held {
		n += h.N
	}
	holding := 0
	for _, i := range l.Idles {
		if i.Held > 0 {
			holding++
		}
	}
	stacks := ledger.ByStack(held)
	var byStack []string
	for _, g := range stacks[:min(len(stacks), maxListed)] {
		where := "unknown stack"
		if fs := l.Stacks[g.Stack]; len(fs) > 0 {
			where = fmt.Sprintf("%s (%s:%d)", fs[0].Function, fs[0].File, fs[0].Line)
		}
		byStack = append(byStack, fmt.Sprintf("%d %s in %d allocations at %s", g.N, l.Unit, g.Allocs, where))
	}
	var owners []string
	for _, g := range ledger.ByOwner(held) {
		if g.Key != "" && len(owners) < maxListed {
			owners = append(owners, fmt.Sprintf("%s (%d %s)", g.Key, g.N, l.Unit))
		}
	}
	var end int64
	for _, h := range l.End {
		end += h.N
	}
	ev := map[string]any{
		"pool":                 l.Pool,
		"unit":                 l.Unit,
		"capacity":             l.Capacity,
		"held_at_end":          end,
		"idle_moments":         len(l.Idles),
		"idle_moments_holding": holding,
		"by_stack":             byStack,
		"source":               in.String(),
	}
	if len(owners) > 0 {
		ev["owners_never_freed"] = owners
	}
	if l.Capacity > 0 {
		ev["leaked_fraction"] = round2(float64(n) / float64(l.Capacity))
	}
	f := diagnose.Finding{
		Kind:     diagnose.KindLeak,
		Severity: sev,
		Title:    fmt.Sprintf("pool %s: %d %s still held %s, by %d allocating stacks", l.Pool, n, l.Unit, when, len(stacks)),
		Stack:    []diagnose.Frame{},
		Evidence: ev,
		Fix: "These allocations were never freed: follow each stack to where its owner should give the slots back " +
			"(the request's finish, abort and retry paths) and check that every alloc has exactly one free.",
	}
	if sev == diagnose.Medium {
		f.Fix += " Held only at the end, they may be requests still running when the program stopped: mark idle " +
			"moments (pool.idle()) to tell."
	}
	for _, fr := range l.Stacks[stacks[0].Stack] {
		f.Stack = append(f.Stack, diagnose.Frame{Function: fr.Function, File: fr.File, Line: uint64(max(fr.Line, 0))})
	}
	if len(f.Stack) > 0 {
		f.Callsite = &f.Stack[0]
	} else {
		ev["callsite_reason"] = "the ledger recorded no stack for this allocation"
	}
	return f, true
}
