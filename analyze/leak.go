package analyze

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/trend"
	"github.com/vramscope/vramscope/internal/units"
)

// minLeakPerStep is the least steady growth reported as a leak. A real
// leak of a few hundred KiB per step matters over a long run, and
// allocator rounding alone never grows a callsite steadily.
const minLeakPerStep = 256 << 10

// leakSeverity grades growth per step. 16 MiB per step exhausts 80 GB in
// about 5000 steps, a day of training; 1 MiB per step takes weeks but
// still ends in an OOM.
func leakSeverity(perStep float64) diagnose.Severity {
	switch {
	case perStep >= 16<<20:
		return diagnose.High
	case perStep >= 1<<20:
		return diagnose.Medium
	}
	return diagnose.Low
}

const leakFix = "Tensors allocated here stay alive from one step to the next: something keeps a reference " +
	"(a list, cache or queue that is never drained, a closure, a tensor kept for logging). " +
	"Drop the reference after use or bound the cache; keep .item() values or .detach().cpu() copies instead of GPU tensors."

// snapshotLeaks reports the callsites whose live bytes on one device grow
// steadily across the snapshots. Sites are matched by line of code, so an
// optimizer state that moves to another address (seed 003) keeps its bytes
// and is not a leak; block addresses only say how much stayed in place.
// The places of one callsite (the lines below it that allocated) are
// summed into its finding, each listed with its share, and named together
// (diagnose.LeakCause).
func (a *Analyzer) snapshotLeaks(ax axis, dev int, series []*deviceDigest) []diagnose.Finding {
	keys := map[string]bool{}
	for _, dd := range series {
		for k := range dd.sites {
			keys[k] = true
		}
	}
	var order []string
	byCallsite := map[string][]string{}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		g := k
		if st := a.sites.get(k); st.Known() {
			g = st.Site.Key()
		}
		if byCallsite[g] == nil {
			order = append(order, g)
		}
		byCallsite[g] = append(byCallsite[g], k)
	}
	var out []diagnose.Finding
	for _, g := range order {
		if f, ok := a.callsiteLeak(ax, dev, series, byCallsite[g]); ok {
			out = append(out, f)
		}
	}
	return out
}

// callsiteLeak judges the summed live bytes of one callsite's places
// (site keys) across the snapshots.
func (a *Analyzer) callsiteLeak(ax axis, dev int, series []*deviceDigest, keys []string) (diagnose.Finding, bool) {
	bytes, requested, blocks := make([]int64, len(series)), make([]int64, len(series)), make([]int, len(series))
	kept := 0
	var parts []diagnose.LeakPart
	var rows []string
	var largest *site
	var largestPerStep float64
	for _, k := range keys {
		own := make([]int64, len(series))
		for i, dd := range series {
			if u := dd.sites[k]; u != nil {
				own[i] = u.bytes
				bytes[i] += u.bytes
				requested[i] += u.requested
				blocks[i] += len(u.blocks)
			}
		}
		kept += keptBlocks(series[0].sites[k], series[len(series)-1].sites[k])
		st := a.sites.get(k)
		perStep := trend.TheilSen(ax.xs, own)
		if largest == nil || perStep > largestPerStep {
			largest, largestPerStep = st, perStep
		}
		if perStep > 0 {
			parts = append(parts, diagnose.LeakPart{Origin: st.Origin, PerStep: int64(math.Round(perStep))})
			rows = append(rows, fmt.Sprintf("%s per %s from %s%s", units.Bytes(math.Round(perStep)), ax.per, st.name(), st.allocatedIn()))
		}
	}
	t := fit(ax.xs, bytes)
	requestedPerStep := trend.TheilSen(ax.xs, requested)
	// With two snapshots a site that appears in the second may be a
	// one-off allocation; only growth beside blocks that were already
	// there counts. Blocks that grow while the bytes asked for do not
	// are the same tensors in blocks rounded differently.
	if !growing(t, minLeakPerStep) || (len(series) == 2 && bytes[0] == 0) || requestedPerStep <= 0 {
		return diagnose.Finding{}, false
	}
	sev := leakSeverity(t.PerStep)
	if len(series) == 2 && sev == diagnose.High {
		sev = diagnose.Medium
	}
	ev := ax.evidence()
	ev["live_bytes"] = bytes
	ev["blocks"] = blocks
	ev["blocks_kept_in_place"] = kept
	ev["requested_bytes_per_step"] = int64(math.Round(requestedPerStep))
	ev["steadiness"] = round2(t.Steadiness)
	per := ax.per
	if h, ok := ax.perHour(bytes); ok {
		ev["bytes_per_hour"] = int64(math.Round(h))
		per += fmt.Sprintf(" (%s an hour)", units.Bytes(math.Round(h)))
	}
	where := ""
	if largest.Origin.Below(largest.Site) {
		where = ", " + diagnose.AllocatedIn(largest.Origin, len(parts)-1)
	}
	if len(parts) > 1 {
		ev["origins"] = rows
	}
	f := diagnose.Finding{
		Kind:         diagnose.KindLeak,
		Severity:     sev,
		Title:        fmt.Sprintf("%s keeps %s more live memory every %s%s", largest.name(), units.Bytes(math.Round(t.PerStep)), per, where),
		Bytes:        t.Last - t.First,
		BytesPerStep: int64(math.Round(t.PerStep)),
		Evidence:     ev,
		Fix:          leakFix,
		Device:       dev,
	}
	largest.blame(&f)
	diagnose.LeakCause(parts).Apply(&f)
	return f, true
}

// keptBlocks counts the blocks of first that are still at the same address
// with the same size in last: leaked tensors stay put while new ones pile
// up beside them.
func keptBlocks(first, last *siteUse) int {
	if first == nil || last == nil {
		return 0
	}
	in := map[block]bool{}
	for _, b := range last.blocks {
		in[b] = true
	}
	n := 0
	for _, b := range first.blocks {
		if in[b] {
			n++
		}
	}
	return n
}
