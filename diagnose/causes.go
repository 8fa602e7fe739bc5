package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// NamedCause is a pattern recognised from stacks and lifetimes that explains a
// finding better than its generic text: a name for JSON consumers, what
// happened, the fix, and the facts that led there.
type NamedCause struct {
	Name        string
	Explanation string
	Fix         string
	// Effect is the fix's predicted effect, where the cause knows it better
	// than the finding's generic what-if; "" keeps the finding's.
	Effect   string
	Evidence []string
}

// The named causes.
const (
	CauseKVCache       = "kv_cache"
	CauseRetainedGraph = "retained_graph"
	CauseKeptOutput    = "kept_output"
	CauseUpcast        = "dtype_upcast"
)

// apply puts the cause into a finding: its fix replaces the generic one,
// and the evidence says why.
func (c *NamedCause) apply(fd *Finding) {
	if c == nil {
		return
	}
	fd.Evidence["cause"] = c.Name
	fd.Evidence["cause_explanation"] = c.Explanation
	fd.Evidence["cause_evidence"] = c.Evidence
	fd.Fix = c.Explanation + " " + c.Fix
}

// Apply puts a cause found by LeakCause into a finding made elsewhere
// (package analyze's leaks between snapshots); nil changes nothing.
func (c *NamedCause) Apply(fd *Finding) { c.apply(fd) }

// LeakPart is one origin's share of a leaking callsite: one line below the
// user's that the leaked memory was allocated through.
type LeakPart struct {
	Origin  callsite.Origin
	PerStep int64
}

// AllocatedIn is how a title names the lines below a callsite where a
// leak was allocated: "allocated in update (transformers/cache_utils.py:147)",
// with "and 1 more line" when there are more; "" without an origin.
func AllocatedIn(largest callsite.Origin, more int) string {
	if !largest.Known() {
		return ""
	}
	s := "allocated in " + largest.String()
	if more > 0 {
		s += " and " + units.Plural(more, "more line")
	}
	return s
}

// minGraphOrigins is how many distinct lines of a model's forward must leak
// under one callsite to read as a kept autograd graph: a kept output is one
// line (the last layer's), the activations behind it are many.
const minGraphOrigins = 3

// LeakCause names what leaks under one callsite from the lines below it,
// given largest first: a cache that grows by concatenation, the
// activations of an autograd graph kept alive by a kept output, or a kept
// output alone. Nil when none fits.
func LeakCause(parts []LeakPart) *NamedCause {
	var cache []string
	forwards := map[string]int64{}
	var order []string // forwards' keys, largest part first
	others := 0        // parts outside any model's forward
	for _, p := range parts {
		if !p.Origin.Known() {
			others++
			continue
		}
		frames := append([]callsite.Origin{p.Origin}, viaOrigins(p.Origin)...)
		for _, o := range frames {
			if cacheFrame(o) {
				cache = append(cache, fmt.Sprintf("%s per step allocated in %s", units.Bytes(p.PerStep), o))
				break
			}
		}
		if slices.ContainsFunc(frames, forwardFrame) {
			o := p.Origin.String()
			if _, ok := forwards[o]; !ok {
				order = append(order, o)
			}
			forwards[o] += p.PerStep
		} else {
			others++
		}
	}
	if len(cache) > 0 {
		return &NamedCause{
			Name: CauseKVCache,
			Explanation: "The memory kept is a cache that grows every step: its update concatenates the new keys and values onto the old " +
				"(a transformers DynamicCache, past_key_values, grown by torch.cat) and the program keeps every cache it made.",
			Fix: "Evict finished sessions (drop their past_key_values when a conversation ends) and bound the cache: a fixed-size or sliding-window cache " +
				"(transformers' StaticCache or a sliding-window cache), a limit on sessions or tokens kept, or offloading idle sessions to the CPU.",
			Evidence: cache,
		}
	}
	if len(forwards) >= minGraphOrigins {
		ev := []string{fmt.Sprintf("%d different lines of a model's forward leak under one call of the model, not only its output:", len(forwards))}
		for _, o := range order {
			ev = append(ev, fmt.Sprintf("%s per step from %s", units.Bytes(forwards[o]), o))
		}
		return &NamedCause{
			Name: CauseRetainedGraph,
			Explanation: "The model ran with autograd on and part of its output is kept from step to step: the kept tensor's grad_fn holds the autograd graph, " +
				"and the graph every activation saved for a backward that never runs (a view such as logits[:, -1] also keeps the whole tensor it views).",
			Fix: "Run evaluation and inference under torch.no_grad() or torch.inference_mode() (model.eval() does not turn autograd off), " +
				"or keep .detach()ed copies of what you keep: out.logits[:, -1].detach().clone(), or .item() / .cpu() values.",
			Evidence: ev,
		}
	}
	if len(forwards) > 0 && others == 0 {
		ev := []string{fmt.Sprintf("all that leaks under the model's call comes from %s of its forward, not from the activations behind them: no autograd graph is kept",
			units.Plural(len(forwards), "line"))}
		for _, o := range order {
			ev = append(ev, fmt.Sprintf("%s per step from %s", units.Bytes(forwards[o]), o))
		}
		return &NamedCause{
			Name: CauseKeptOutput,
			Explanation: "Each step keeps a tensor the model's forward returned (its output, such as the logits) and nothing else of the forward. " +
				"If what the program keeps is a slice or view of it (out.logits[:, -1], logits[..., :k]), the view keeps the whole tensor it views alive.",
			Fix: "Keep a copy of only what is needed: out.logits[:, -1].clone() ([batch, vocab] instead of [batch, sequence, vocab]), .cpu() or .item() values, " +
				"and drop the outputs once used.",
			Evidence: ev,
		}
	}
	return nil
}

// viaOrigins are an origin's frames on the way to the callsite, each as an
// Origin for printing.
func viaOrigins(o callsite.Origin) []callsite.Origin {
	out := make([]callsite.Origin, len(o.Via))
	for i, fr := range o.Via {
		out[i] = callsite.Origin{Frame: fr}
	}
	return out
}

// cacheFrame reports whether a frame is a cache's code: transformers'
// cache_utils.py, or a function or file named for a KV cache.
func cacheFrame(o callsite.Origin) bool {
	file := strings.ToLower(o.Frame.Filename)
	name := strings.ToLower(o.Frame.Name)
	return strings.Contains(file, "cache_utils") || strings.Contains(file, "kv_cache") ||
		strings.Contains(name, "kv_cache") || strings.Contains(name, "past_key_values")
}

// forwardFrame reports whether a frame is a module's forward (or a function
// of a modeling file): model code that autograd records.
func forwardFrame(o callsite.Origin) bool {
	return o.Frame.Name == "forward" || strings.Contains(o.Frame.Filename, "modeling_")
}

// minUpcastShare is the least share of the peak an upcast copy must be to
// name the peak's cause: a doubled small tensor explains nothing.
const minUpcastShare = 0.1

// upcastCause recognises a dtype upcast at the peak: a block born within
// the trace that asks for exactly twice the bytes of a block allocated
// before it and still live, the same elements in float32 instead of
// bfloat16 or float16 (logits.float(), then log_softmax or cross_entropy
// on the copy). allocs are the blocks allocated at the peak. The copy is
// made by the program's own thread outside an optimizer: a gradient of the
// autograd engine or an optimizer's buffer is never one.
func upcastCause(pl *placer, allocs []int, peak int64) *NamedCause {
	tl := pl.tl
	byRequested := map[uint64]int{} // requested bytes -> the earliest block asking for them
	for _, k := range allocs {
		a := tl.Allocation(k)
		if j, ok := byRequested[a.Requested]; !ok || a.Start < tl.Allocation(j).Start {
			byRequested[a.Requested] = k
		}
	}
	best, base := -1, -1
	for _, k := range allocs {
		a := tl.Allocation(k)
		// The autograd engine's gradients are the size of what they
		// differentiate, often twice another tensor: no upcast.
		if a.Start < 0 || a.Free == replay.LiveAtEnd || a.Requested%2 != 0 || float64(a.Requested) < minUpcastShare*float64(peak) ||
			pl.alloc(k).Backward != nil || optimizerStack(pl.sn, a.Stack) {
			continue
		}
		j, ok := byRequested[a.Requested/2]
		if !ok || tl.Allocation(j).Start >= a.Start {
			continue
		}
		if best < 0 || a.Requested > tl.Allocation(best).Requested {
			best, base = k, j
		}
	}
	if best < 0 {
		return nil
	}
	b, a := tl.Allocation(best), tl.Allocation(base)
	n := 0
	for _, k := range allocs {
		if r := tl.Allocation(k).Requested; r == b.Requested {
			n++
		}
	}
	ev := []string{fmt.Sprintf("%s from %s asks for exactly twice the %s of a block from %s allocated before it and live beside it: the same elements in a 4-byte dtype instead of a 2-byte one",
		units.Bytes(b.Requested), pl.alloc(best), units.Bytes(a.Requested), pl.alloc(base))}
	if n > 1 {
		ev = append(ev, fmt.Sprintf("%d blocks of that doubled size are allocated at the peak (%s): the upcast copy, what is computed from it and its gradients", n, units.Bytes(int64(n)*int64(b.Size))))
	}
	if op := lossOp(pl, b.Stack); op != "" {
		ev = append(ev, "its stack runs "+op)
	}
	return &NamedCause{
		Name: CauseUpcast,
		Explanation: "The peak is a dtype upcast: a large bf16/fp16 tensor (typically the logits) is copied to float32 (.float(), .to(torch.float32)) " +
			"and log_softmax or cross_entropy runs on the full copy, so the peak holds the tensor two and three times over in float32.",
		Fix: "Compute the loss or log-probabilities in chunks of rows, keep bf16 where the precision allows, or use a fused or chunked cross-entropy " +
			"(for example Liger's fused linear cross-entropy) that never materialises the float32 logits.",
		Evidence: ev,
	}
}

// optimizerStack reports whether a stack runs a torch optimizer, whose
// temporaries (Adam's foreach buffers) are sized by the parameters, not
// copies of an activation.
func optimizerStack(sn *snapshot.Snapshot, id snapshot.StackID) bool {
	if id == snapshot.NoStack {
		return false
	}
	for _, fid := range sn.Stack(id) {
		if strings.Contains(strings.ReplaceAll(sn.Frames[fid].Filename, `\`, "/"), "torch/optim/") {
			return true
		}
	}
	return false
}

// lossOps are the torch functions that run on full logits.
var lossOps = []string{"cross_entropy", "log_softmax", "softmax", "nll_loss"}

// lossOp names the first of lossOps on a stack, with its frame, or "".
func lossOp(pl *placer, id snapshot.StackID) string {
	if id == snapshot.NoStack {
		return ""
	}
	for _, fid := range pl.sn.Stack(id) {
		fr := pl.sn.Frames[fid]
		if slices.Contains(lossOps, fr.Name) {
			return fr.String()
		}
	}
	return ""
}
