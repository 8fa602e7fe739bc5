package analyze

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
)

// logsCannotNameCode is every log finding's callsite reason.
const logsCannotNameCode = "memory logs record totals, not stacks: they cannot name the code"

const logFix = " The log cannot name the code: record history (torch.cuda.memory._record_memory_history()), " +
	"dump snapshots at two or three steps and run vramscope analyze on them."

// mergeTextFindings adds the verdicts of a process's memory logs, summary
// dumps and OOM messages. Where a snapshot already names code for the same
// kind of problem, the log's numbers go into that finding's evidence
// instead of a second, code-less finding.
func mergeTextFindings(fs []diagnose.Finding, notes []string, texts []*textDigest) ([]diagnose.Finding, []string) {
	for _, t := range texts {
		fs = append(fs, t.pools...) // pool leaks stand apart: see poolinput.go
		var found []diagnose.Finding
		if len(t.points) >= 2 {
			found = append(found, logFindings(t)...)
		} else if len(t.points) == 1 {
			notes = append(notes, fmt.Sprintf("%s has one sample: no trend", describe(t)))
		}
		for _, m := range t.ooms {
			f := diagnose.ExplainMessage(m).Finding(t.in.String())
			// The message of an OOM a snapshot's trace also recorded joins
			// that finding, which names the line; other messages are
			// failures of their own.
			if i := sameOOM(fs, f); i >= 0 {
				fs[i].Evidence[evidenceKey(t)] = corroboration(f)
				continue
			}
			fs = append(fs, f)
		}
		for _, f := range found {
			if i := strongest(fs, f.Kind); i >= 0 {
				fs[i].Evidence[evidenceKey(t)] = corroboration(f)
				continue
			}
			fs = append(fs, f)
		}
	}
	return fs, notes
}

func evidenceKey(t *textDigest) string {
	if len(t.ooms) > 0 {
		return "oom_message"
	}
	return "memory_log"
}

// sameOOM returns the index of the trace OOM finding that message finding
// f reports too, or -1: same device, and a segment the message prints as
// its "Tried to allocate" (two decimals, so within 5.12 MiB).
func sameOOM(fs []diagnose.Finding, f diagnose.Finding) int {
	const printed = 6 << 20
	for i, g := range fs {
		seg, ok := g.Evidence["segment_bytes"].(uint64)
		if g.Kind == diagnose.KindOOM && ok && g.Device == f.Device && f.Bytes > 0 && max(int64(seg)-f.Bytes, f.Bytes-int64(seg)) <= printed {
			return i
		}
	}
	return -1
}

// corroboration is what a log adds to a snapshot's finding.
func corroboration(f diagnose.Finding) map[string]any {
	c := map[string]any{"title": f.Title}
	if f.BytesPerStep != 0 { // a log's growth; an OOM message has none
		c["bytes_per_step"] = f.BytesPerStep
	}
	for _, k := range []string{"source", "per", "samples", "steadiness", "line", "cause", "contributing"} {
		if v, ok := f.Evidence[k]; ok {
			c[k] = v
		}
	}
	return c
}

// strongest returns the index of the finding of kind k that ranks first
// (severity, then bytes), or -1.
func strongest(fs []diagnose.Finding, k diagnose.Kind) int {
	best := -1
	for i, f := range fs {
		if f.Kind == k && (best < 0 || compareFindings(f, fs[best]) < 0) {
			best = i
		}
	}
	return best
}

// logFindings reads one series: leak from allocated, fragmentation from
// reserved minus allocated, OOMs from the summaries' counter.
func logFindings(t *textDigest) []diagnose.Finding {
	n := len(t.points)
	ax := axis{per: "sample"}
	cs := cacheSeries{peakSource: "allocated in the log (no memory_summary peak)"}
	var nonReleasable int64
	for i, p := range t.points {
		ax.xs = append(ax.xs, float64(i))
		cs.allocated = append(cs.allocated, p.allocated)
		cs.reserved = append(cs.reserved, p.reserved)
		if p.peak > cs.peak {
			cs.peak, cs.peakSource = p.peak, "memory_summary peak in the log"
		}
		nonReleasable = p.nonReleasable
	}
	cs.ax = ax
	base := func(f *diagnose.Finding) {
		f.Stack = []diagnose.Frame{}
		f.Evidence["source"] = t.in.String()
		f.Evidence["samples"] = n
		f.Evidence["callsite_reason"] = logsCannotNameCode
		delete(f.Evidence, "snapshots")
	}

	var out []diagnose.Finding
	if tr := fit(ax.xs, cs.allocated); growing(tr, minLeakPerStep) {
		ev := ax.evidence()
		putSeries(ev, "allocated_bytes", cs.allocated)
		ev["steadiness"] = round2(tr.Steadiness)
		f := diagnose.Finding{
			Kind:         diagnose.KindLeak,
			Severity:     leakSeverity(tr.PerStep),
			Title:        fmt.Sprintf("allocated memory grows %s per sample in %s", units.Bytes(math.Round(tr.PerStep)), t.in),
			Bytes:        tr.Last - tr.First,
			BytesPerStep: int64(math.Round(tr.PerStep)),
			Evidence:     ev,
			Fix:          "Something keeps GPU tensors alive from one step to the next." + logFix,
		}
		base(&f)
		out = append(out, f)
	}
	if f, ok := fragmentation(cs); ok {
		last := t.points[n-1]
		inFree := last.reserved-last.allocated-nonReleasable >= nonReleasable
		f.Fix = fragFix(f.Severity, false, inFree) + logFix
		base(&f)
		out = append(out, f)
	}
	if last := t.points[n-1]; last.cudaOOMs > 0 {
		f := diagnose.Finding{
			Kind:     diagnose.KindOOM,
			Severity: diagnose.High,
			Title:    fmt.Sprintf("torch counted %d CUDA out-of-memory errors (memory_summary in %s)", last.cudaOOMs, t.in),
			Bytes:    last.reserved,
			Evidence: map[string]any{"cuda_ooms": last.cudaOOMs, "per": "sample"},
			Fix:      "Find the failing allocation in the job's OOM message or in a snapshot dumped on OOM." + logFix,
		}
		base(&f)
		out = append(out, f)
	}
	return out
}
