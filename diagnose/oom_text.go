package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/internal/units"
)

// Cause names what an out-of-memory error shows as the reason the memory
// was not there. The names are part of the JSON contract (README, "Causes
// of an OOM").
type Cause string

const (
	// CauseOtherProcesses: other processes hold a large part of the GPU.
	CauseOtherProcesses Cause = "other_processes"
	// CauseMemoryCap: a per-process cap (set_per_process_memory_fraction,
	// the message's "allowed") refused the request while the device had
	// room.
	CauseMemoryCap Cause = "memory_cap"
	// CauseRequestExceedsDevice: the one request is larger than the GPU.
	CauseRequestExceedsDevice Cause = "request_exceeds_device"
	// CauseFreeButRefused: the device reported more free memory than was
	// asked for, and no cap explains the refusal: the limit is outside
	// PyTorch.
	CauseFreeButRefused Cause = "free_but_refused"
	// CauseFragmentation: memory reserved but unallocated, a real share of
	// the reserve, would have served the request had it been in one piece.
	CauseFragmentation Cause = "fragmentation"
	// CausePeak: the live tensors plus the request exceed what the GPU had.
	CausePeak Cause = "peak"
	// CauseOutsideAllocator: the memory ran out outside PyTorch's allocator
	// (a CUDA call, cuBLAS, NCCL), or this process holds much memory
	// outside it.
	CauseOutsideAllocator Cause = "outside_allocator"
	// CauseUnknown: the facts do not decide (a message cut short, numbers
	// that cannot all be true).
	CauseUnknown Cause = "unknown"
)

// OOMCause is what the facts of one OOM decide: the cause, what
// contributed, and the numbers that decided each.
type OOMCause struct {
	Cause        Cause   `json:"cause"`
	Contributing []Cause `json:"contributing"`
	// Because gives the numbers behind the cause, then behind each
	// contributing cause.
	Because []string `json:"because"`
	// Impossible lists facts that cannot all be true; the cause is then
	// unknown.
	Impossible []string `json:"impossible,omitempty"`
}

// names returns the contributing causes as strings, for evidence maps.
func (c OOMCause) names() []string {
	out := make([]string, len(c.Contributing))
	for i, x := range c.Contributing {
		out[i] = string(x)
	}
	return out
}

// evidence adds the decision to a finding's evidence.
func (c OOMCause) evidence(ev map[string]any) {
	ev["cause"] = string(c.Cause)
	ev["contributing"] = c.names()
	ev["because"] = strings.Join(c.Because, "; ")
	if len(c.Impossible) > 0 {
		ev["impossible"] = c.Impossible
	}
}

// oomFacts are the numbers an OOM explanation rests on, whether they come
// from a trace's oom event or from an error message. A nil size is one the
// source does not state.
type oomFacts struct {
	who     string // "compute_logprobs (train.py:40)" or "the program"
	request uint64 // rounded request from a trace; 0 when only the segment is known
	segment *int64 // the allocation that failed ("Tried to allocate")

	capacity, free *int64
	allowed        *int64 // the per-process cap
	// capInferred: a trace's oom event saw the device with room for the
	// segment, so a cap refused it though its value is not recorded.
	capInferred bool

	thisProcess *int64 // NVML usage of this process, non-PyTorch memory included
	others      *int64 // NVML usage of the other processes listed
	otherList   string // "process 5403 (21.69 GiB)"

	allocated, reserved, trapped, privatePools *int64
	// noReserve: the allocator keeps no reserve of its own (the
	// cudaMallocAsync backend: the driver's pool caches out of sight).
	noReserve bool
	// platformLimit: the platform refuses any block above 4 GB.
	platformLimit bool
	// capHidden: the wording cannot show a cap (torch 2.1 and 2.2 left the
	// "allowed" clause out, pytorch/pytorch#111363).
	capHidden  bool
	expandable bool

	largestFree string // "The largest free block, 256.00 MiB, could not serve it: ..."
	top         []string
}

// Thresholds of the decision. Sizes in a message are rounded to two
// decimals (±5.12 MiB for a GiB figure), and a process always holds memory
// outside PyTorch's allocator (a CUDA context of 300 MiB to 1 GiB).
const (
	slack = 16 << 20 // rounding of the two or three printed sizes a comparison adds
	// holeShare is the share of the reserve that holes must reach to be
	// the cause; contributingHoleShare to be named at all (seed 002's 6%).
	// Threads that halved the batch had holes of 11% and 15%.
	holeShare             = 0.20
	contributingHoleShare = 0.05
	// holeFloor: holes under this share of the GPU are noise beside it
	// (94.59 MiB of holes beside another process's 21.69 GiB).
	holeFloor = 0.01
	// contextAllowance is the memory outside the reserve a process holds
	// anyway, counted against "outside" where NVML did not give this
	// process's own usage.
	contextAllowance = 1 << 30
	// driverAllowance: what a GPU nobody uses already reports as used.
	driverAllowance = 512 << 20
	// majorShare of the GPU, beyond the allowances, makes other processes
	// (or this one's memory outside PyTorch) the cause.
	majorShare = 0.20
	minorBytes = 1 << 30
	// contextShare: a CUDA context of up to contextAllowance that is this
	// share of a small GPU contributes.
	contextShare = 0.10
	// freeMargin of the GPU is what free memory must exceed the request by
	// to have been refused: drivers keep a little they report free.
	freeMargin = 0.005
	// fitShare: without a free figure, a reserve and request within this
	// share of the GPU do not explain a refusal.
	fitShare = 0.75
	// fullShare: this process and its request filling this share of the
	// GPU make the peak contribute to another cause.
	fullShare = 0.75
	// plausibleOverhead bounds the non-PyTorch memory of the process a
	// container's NVML list names by its host pid (see selfFromList).
	plausibleOverhead = 4 << 30
)

// decide names the cause from the facts, in this order: a request larger
// than the device; numbers that cannot be true; a cap; free memory
// refused; then, on a full device, who held it: other processes, this
// process outside PyTorch, holes in PyTorch's reserve, or the live tensors.
// Causes that did not decide but would have helped are contributing.
func (o oomFacts) decide() OOMCause {
	c := OOMCause{Contributing: []Cause{}}
	because := func(format string, args ...any) { c.Because = append(c.Because, fmt.Sprintf(format, args...)) }
	contribute := func(x Cause, format string, args ...any) {
		if x != c.Cause && !slices.Contains(c.Contributing, x) {
			c.Contributing = append(c.Contributing, x)
			because(format, args...)
		}
	}
	c.Impossible = o.impossible()
	if o.segment == nil {
		c.Cause = CauseUnknown
		because("the message does not say how much was asked for")
		return c
	}
	req := *o.segment
	var free int64
	if o.free != nil {
		free = *o.free
	}
	raw, weighed, outsideKnown := o.outside()
	overhead := o.nonPyTorch()
	holes, holesShare := o.holes()
	holesAlone := holes >= req && holesShare >= holeShare
	holesHelp := holes > 0 && holesShare >= contributingHoleShare && (holes >= req || holes+free >= req && o.free != nil && !o.expandable)
	holesWhy := func() string {
		return fmt.Sprintf("%s of the %s reserved (%d%%) was free in holes%s", sz(holes), sz(*o.reserved), pct(holesShare), o.holesReach(holes, free, req))
	}
	othersContribute := func() {
		if outsideKnown && o.minor(raw, weighed) {
			contribute(CauseOtherProcesses, "%s of the GPU was in use outside this process%s", sz(raw), o.othersNamed())
		}
	}
	// contributions adds what else held memory, whatever the cause.
	contributions := func() {
		othersContribute()
		switch {
		case overhead != nil && o.capacity != nil && float64(*overhead-contextAllowance) >= max(minorBytes/2, contextShare/2*float64(*o.capacity)):
			contribute(CauseOutsideAllocator, "this process held %s outside PyTorch's allocator", sz(*overhead))
		case overhead == nil && outsideKnown && o.thisProcess == nil && o.others == nil && o.capacity != nil &&
			float64(min(raw, contextAllowance)) >= contextShare*float64(*o.capacity):
			contribute(CauseOutsideAllocator, "about %s of the GPU's %s was neither PyTorch's reserve nor free: this process's CUDA context and libraries, or other processes", sz(raw), sz(*o.capacity))
		}
		if holesHelp {
			contribute(CauseFragmentation, "%s", holesWhy())
		}
	}

	// An APU or unified memory reports free system memory beyond the
	// GPU's capacity: the request was refused with that much "free".
	if o.capacity != nil && o.free != nil && *o.free > *o.capacity+slack && *o.free >= req {
		c.Cause = CauseFreeButRefused
		because("the GPU reported %s free, more than its capacity of %s (an APU or unified memory counting system memory) and more than the %s asked for", sz(*o.free), sz(*o.capacity), sz(req))
		if req > *o.capacity+slack {
			contribute(CauseRequestExceedsDevice, "the request, %s, is larger than the GPU's %s", sz(req), sz(*o.capacity))
		}
		c.Impossible = nil
		return c
	}
	// A request larger than the GPU decides whatever else the numbers say.
	if o.capacity != nil && req > *o.capacity+slack || req >= int64(units.EiB) {
		c.Cause = CauseRequestExceedsDevice
		if o.capacity != nil {
			because("the request, %s, is larger than the GPU's %s", sz(req), sz(*o.capacity))
		} else {
			because("the request is 1 EiB or more")
		}
		othersContribute()
		return c
	}
	if len(c.Impossible) > 0 {
		c.Cause = CauseUnknown
		because("the numbers cannot all be true of a GPU's own memory: %s", strings.Join(c.Impossible, "; "))
		return c
	}
	if o.platformLimit {
		c.Cause = CauseFreeButRefused
		because("the platform cannot allocate one block larger than 4 GB, and %s was asked for", sz(req))
		return c
	}

	used := o.used() // the reserve, or what the async backend has allocated
	capSet := o.allowed != nil && (o.capacity == nil || *o.allowed < *o.capacity-slack)
	capBinds := o.capInferred
	if capSet && used != nil {
		// The allocator checks the cap before asking the driver: a device
		// with room means the cap refused, even where rounding hides it.
		capBinds = *used+req > *o.allowed-slack || o.free != nil && free >= req
	}
	if capBinds {
		// Within a cap someone chose, holes that would have served the
		// request are the waste; without them the cap is the limit.
		if holesAlone {
			c.Cause = CauseFragmentation
			because("%s", holesWhy())
			contribute(CauseMemoryCap, "%s", o.capBecause(req))
			return c
		}
		c.Cause = CauseMemoryCap
		because("%s", o.capBecause(req))
		return c
	}
	margin := int64(slack)
	if o.capacity != nil {
		margin = max(margin, int64(freeMargin*float64(*o.capacity)))
	}
	if o.free != nil && free >= req+margin {
		c.Cause = CauseFreeButRefused
		because("the GPU reported %s free, more than the %s asked for, and no cap was set", sz(free), sz(req))
		o.peakContributes(&c, req, contribute)
		return c
	}
	if o.free == nil && used != nil && o.capacity != nil && float64(*used+req) <= fitShare*float64(*o.capacity) {
		c.Cause = CauseFreeButRefused
		because("PyTorch held %s of the GPU's %s and asked for %s: its own memory does not explain the refusal", sz(*used), sz(*o.capacity), sz(req))
		return c
	}

	// The device was full: who held it?
	switch {
	case outsideKnown && o.capacity != nil && o.major(weighed) && free+weighed >= req && o.noReserve && o.others == nil:
		c.Cause = CauseFragmentation
		because("%s of the GPU's %s was neither allocated nor free: the cudaMallocAsync pool's cached, fragmented memory (or other processes)", sz(raw), sz(*o.capacity))
		return c
	case outsideKnown && o.capacity != nil && o.major(weighed) && free+weighed >= req:
		c.Cause = CauseOtherProcesses
		because("%s of the GPU's %s was in use outside this process%s", sz(raw), sz(*o.capacity), o.othersNamed())
		o.peakContributes(&c, req, contribute)
	case overhead != nil && o.capacity != nil && o.major(*overhead-contextAllowance) && free+*overhead >= req:
		c.Cause = CauseOutsideAllocator
		because("this process held %s outside PyTorch's allocator (%s in use, %s reserved by PyTorch)", sz(*overhead), sz(*o.thisProcess), sz(*o.reserved))
	case holesAlone:
		c.Cause = CauseFragmentation
		because("%s", holesWhy())
	case o.allocated != nil:
		c.Cause = CausePeak
		because("%s allocated plus the %s asked for exceeds what the GPU had left (%s free)", sz(*o.allocated), sz(req), sz(free))
	default:
		c.Cause = CauseUnknown
		because("the message does not say how much PyTorch held")
		return c
	}
	contributions()
	return c
}

// peakContributes names the live tensors too when this process with the
// request fills most of the GPU: removing the other cause would not leave
// much room.
func (o oomFacts) peakContributes(c *OOMCause, req int64, contribute func(Cause, string, ...any)) {
	own := o.thisProcess
	if own == nil {
		own = o.used()
	}
	if own != nil && o.capacity != nil && float64(*own+req) >= fullShare*float64(*o.capacity) {
		contribute(CausePeak, "this process held %s of the GPU's %s and asked for %s more", sz(*own), sz(*o.capacity), sz(req))
	}
}

// impossible lists the facts that contradict each other on a discrete GPU.
func (o oomFacts) impossible() []string {
	var out []string
	if o.capacity == nil {
		return nil
	}
	total := *o.capacity
	for _, f := range []struct {
		name string
		v    *int64
	}{{"allocated", o.allocated}, {"reserved", o.reserved}, {"free", o.free}, {"this process's usage", o.thisProcess}, {"the other processes' usage", o.others}} {
		if f.v != nil && *f.v > total+slack {
			out = append(out, fmt.Sprintf("%s (%s) exceeds the capacity (%s)", f.name, sz(*f.v), sz(total)))
		}
	}
	if o.allocated != nil && o.reserved != nil && *o.allocated > *o.reserved+slack {
		out = append(out, fmt.Sprintf("allocated (%s) exceeds reserved (%s)", sz(*o.allocated), sz(*o.reserved)))
	}
	return out
}

// used is what counts against a cap: the reserve, or the allocations of an
// allocator that keeps none.
func (o oomFacts) used() *int64 {
	if o.reserved != nil {
		return o.reserved
	}
	if o.noReserve {
		return o.allocated
	}
	return nil
}

// holes returns the reserve's free holes and their share of the reserve,
// or nothing when they are too small beside the GPU to matter.
func (o oomFacts) holes() (int64, float64) {
	if o.trapped == nil || o.reserved == nil || *o.reserved <= 0 {
		return 0, 0
	}
	if o.capacity != nil && float64(*o.trapped) < holeFloor*float64(*o.capacity) {
		return 0, 0
	}
	return *o.trapped, float64(*o.trapped) / float64(*o.reserved)
}

func (o oomFacts) holesReach(holes, free, req int64) string {
	if holes >= req {
		return fmt.Sprintf(", more than the %s asked for", sz(req))
	}
	return fmt.Sprintf(", which with the %s free would have served the %s asked for", sz(free), sz(req))
}

// capBecause states the cap's numbers.
func (o oomFacts) capBecause(req int64) string {
	used := o.used()
	if o.allowed == nil {
		return fmt.Sprintf("the GPU had %s free, more than the %s segment, so a per-process memory fraction refused it (its cap lies between %s and %s; a trace does not record it, and a limit outside PyTorch, such as MIG or WSL, would look the same)",
			sz(deref(o.free)), sz(req), sz(deref(used)), sz(deref(used)+req))
	}
	return fmt.Sprintf("%s reserved plus the %s asked for exceeds the %s allowed", sz(*used), sz(req), sz(*o.allowed))
}

// outside is the GPU memory this process did not hold: capacity − free −
// this process's usage (its reserve where NVML did not say), and that
// figure less what a GPU and a process hold anyway (the driver's share, a
// CUDA context), which the decision weighs.
func (o oomFacts) outside() (raw, weighed int64, ok bool) {
	if o.capacity == nil || o.free == nil {
		if o.others != nil {
			return *o.others, *o.others, true
		}
		return 0, 0, false
	}
	used := *o.capacity - *o.free
	switch {
	case o.thisProcess != nil:
		raw = used - *o.thisProcess
		return raw, max(0, raw-driverAllowance), true
	case o.used() != nil:
		raw = used - *o.used()
		return raw, max(0, raw-contextAllowance), true
	}
	return 0, 0, false
}

// nonPyTorch is this process's memory outside PyTorch's allocator.
func (o oomFacts) nonPyTorch() *int64 {
	if o.thisProcess == nil || o.reserved == nil {
		return nil
	}
	return new(max(0, *o.thisProcess-*o.reserved))
}

// major: memory held elsewhere is the cause when it is a fifth of the GPU
// or more than this process's reserve.
func (o oomFacts) major(b int64) bool {
	return float64(b) >= majorShare*float64(*o.capacity) || (o.reserved != nil && b > *o.reserved && b >= minorBytes)
}

// minor: memory held elsewhere contributes from 1 GiB (raw), of which
// half a GiB is more than a driver or context keeps anyway (weighed).
func (o oomFacts) minor(raw, weighed int64) bool {
	return raw >= minorBytes && weighed >= minorBytes/2
}

func (o oomFacts) othersNamed() string {
	if o.otherList == "" {
		return ""
	}
	return " (" + o.otherList + ")"
}

// paragraph is the explanation a person can act on: what was asked, why
// neither the cache nor the GPU could serve it, and what to change.
func (o oomFacts) paragraph(c OOMCause) string { return o.account(c) + " " + o.remedy(c) }

// account says what was asked, where the GPU's memory was, and the cause
// the facts decide.
func (o oomFacts) account(c OOMCause) string {
	var s []string
	add := func(format string, args ...any) { s = append(s, fmt.Sprintf(format, args...)) }
	if o.segment != nil {
		seg := units.Bytes(*o.segment)
		if *o.segment >= int64(units.EiB) {
			add("The allocator was asked for 1 EiB or more.")
		} else if o.request > 0 {
			add("%s asked for %s (rounded as the allocator rounds), so with no cached block that large the allocator needed a new %s segment.",
				o.who, units.Bytes(o.request), seg)
		} else if !o.noReserve {
			add("The allocator tried to reserve a %s segment (%s).", seg, segmentMeaning(uint64(*o.segment)))
		}
	}
	if f := o.whereMemoryWas(); f != "" {
		add("%s", f)
	}
	if o.largestFree != "" {
		add("%s.", o.largestFree)
	}
	if len(o.top) > 0 {
		add("Most allocated memory at the failure comes from %s.", strings.Join(o.top, ", "))
	}
	add("Cause: %s, because %s.", c.Cause, c.Because[0])
	return strings.Join(s, " ")
}

// remedy is what to change: the advice for the cause, then for each
// contributing cause, and a split of a request that dominates.
func (o oomFacts) remedy(c OOMCause) string {
	s := []string{o.advice(c.Cause)}
	for i, x := range c.Contributing {
		s = append(s, fmt.Sprintf("Contributing: %s, because %s. %s", x, c.Because[i+1], o.advice(x)))
	}
	// One allocation of 5% or more of everything allocated is a tensor
	// worth splitting (seed 002's upcast logits).
	if o.segment != nil && o.allocated != nil && *o.allocated > 0 && *o.segment*20 >= *o.allocated && (c.Cause == CausePeak || c.Cause == CauseFragmentation || c.Cause == CauseMemoryCap) {
		share := fmt.Sprintf("%d%% of", *o.segment*100 / *o.allocated)
		if *o.segment > *o.allocated {
			share = "more than"
		}
		s = append(s, fmt.Sprintf("That single %s allocation is %s the %s allocated: computing the tensor in chunks would need a fraction of it.",
			units.Bytes(*o.segment), share, units.Bytes(*o.allocated)))
	}
	return strings.Join(s, " ")
}

// whereMemoryWas says where the GPU's memory was at the failure, with
// every fact known and nothing for the unknown ones.
func (o oomFacts) whereMemoryWas() string {
	var parts []string
	if o.free != nil {
		f := fmt.Sprintf("The GPU had only %s free", sz(*o.free))
		if o.segment != nil && *o.free >= *o.segment {
			f = fmt.Sprintf("The GPU still had %s free", sz(*o.free))
		}
		if o.capacity != nil {
			f += " of " + sz(*o.capacity)
		}
		parts = append(parts, f)
	}
	if o.allowed != nil {
		parts = append(parts, fmt.Sprintf("set_per_process_memory_fraction capped this process at %s", sz(*o.allowed)))
	}
	if o.thisProcess != nil {
		parts = append(parts, fmt.Sprintf("this process used %s", sz(*o.thisProcess)))
	}
	switch {
	case o.allocated != nil && o.reserved != nil && o.trapped != nil:
		parts = append(parts, fmt.Sprintf("PyTorch had %s allocated and %s reserved; %s of the reserved memory was free but trapped in segments that still hold live blocks (at an OOM the allocator has already returned every fully free segment, so empty_cache() cannot help)",
			sz(*o.allocated), sz(*o.reserved), sz(*o.trapped)))
	case o.allocated != nil && o.noReserve:
		parts = append(parts, fmt.Sprintf("PyTorch's cudaMallocAsync backend had %s allocated", sz(*o.allocated)))
	case o.allocated != nil:
		parts = append(parts, fmt.Sprintf("PyTorch had %s allocated", sz(*o.allocated)))
	}
	if p := o.privatePools; p != nil && *p > 0 {
		parts = append(parts, fmt.Sprintf("%s of the allocated memory in private pools (CUDA graphs, MemPools) that other requests cannot reuse", sz(*p)))
	}
	if n := o.nonPyTorch(); n != nil {
		parts = append(parts, fmt.Sprintf("%s of this process's memory was outside PyTorch's allocator (CUDA context, cuBLAS or NCCL workspaces, other libraries)", sz(*n)))
	}
	if o.others != nil && o.otherList != "" {
		parts = append(parts, fmt.Sprintf("other processes used %s: %s", sz(*o.others), o.otherList))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "."
}

// advice is what to change for cause x.
func (o oomFacts) advice(x Cause) string {
	req := "the request"
	if o.segment != nil {
		req = "the " + sz(*o.segment) + " request"
	}
	switch x {
	case CauseOtherProcesses:
		return "Free the GPU (nvidia-smi lists who holds it: a finished job's zombie, a notebook, a second server) or pick an idle one with CUDA_VISIBLE_DEVICES; on a shared GPU, budget for what the others hold."
	case CauseOutsideAllocator:
		if o.thisProcess == nil && o.segment != nil {
			return "The message does not say how much this process used, so that memory is its CUDA context and libraries (300 MiB to 1 GiB, more with cuDNN and cuBLAS loaded) or other processes: on a small GPU the context alone is a real share, and it cannot be freed, only budgeted for; nvidia-smi shows whether other processes hold the rest."
		}
		return "Memory held outside PyTorch's allocator (a CUDA context per extra device, cuBLAS and cuDNN workspaces, NCCL buffers, TensorRT, CuPy or another framework in the same process) does not show in torch.cuda.memory_allocated(): find which library holds it and cap or free it."
	case CauseMemoryCap:
		if o.allowed != nil {
			return fmt.Sprintf("Raise the fraction (torch.cuda.set_per_process_memory_fraction, or the framework option that sets it) or remove it: the device itself had room; otherwise lower what the process keeps allocated below %s.", sz(*o.allowed))
		}
		return "Raise the fraction (torch.cuda.set_per_process_memory_fraction, or the framework option that sets it), or lower what the process keeps allocated."
	case CauseRequestExceedsDevice:
		if o.segment != nil && (*o.segment >= int64(units.EiB) || o.capacity != nil && *o.segment > 1000**o.capacity) {
			return fmt.Sprintf("No setting makes %s fit, and no real tensor is that large: a shape computed wrong (an overflow, a negative or garbage dimension, a wrong dtype) asked for it; print the shapes at the failing line.", req)
		}
		return fmt.Sprintf("No setting makes %s fit on this GPU: shard the tensor or the model across GPUs (tensor parallelism, FSDP), offload it to the CPU, quantize it, or compute it in chunks.", req)
	case CauseFreeButRefused:
		if o.capHidden {
			return "Torch 2.1 and 2.2 leave the \"allowed\" clause out of this message (pytorch/pytorch#111363): if a memory fraction was set (torch.cuda.set_per_process_memory_fraction, or a framework option that sets it), it is the first suspect. Otherwise the limit is outside PyTorch: a MIG slice or an MPS memory limit, Windows WDDM or WSL reserving memory, an APU or integrated GPU whose free figure counts shared system memory, a driver that reports more than it can give, or another process that took the memory between the failure and the message. nvidia-smi on the host shows which."
		}
		return "The limit is outside PyTorch: a MIG slice or an MPS memory limit, Windows WDDM or WSL reserving memory, an APU or integrated GPU whose free figure counts shared system memory, a driver that reports more than it can give, or another process that took the memory between the failure and the message. nvidia-smi on the host shows which."
	case CauseFragmentation:
		if o.noReserve {
			return "The cudaMallocAsync backend does not trim the driver's pool before it fails: torch.cuda.empty_cache() trims it (cudaMemPoolTrimTo), or drop backend:cudaMallocAsync for the native allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
		}
		if o.expandable {
			return "With expandable segments on, the holes lie in partly used pages: allocate long-lived tensors before or apart from transient ones."
		}
		if o.trapped != nil && o.segment != nil && *o.trapped >= *o.segment {
			return "The trapped memory would have served the request had it been in one piece: this OOM is fragmentation, and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator unmap those holes and map them again contiguously."
		}
		return "The free GPU memory plus the trapped memory would have been enough: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the allocator unmap the holes' free pages and map them where the request needs them."
	case CausePeak:
		return fmt.Sprintf("The live tensors simply need more memory than the GPU has left: lower the peak where %s is made (a smaller batch or sequence length, activation checkpointing, computing it in chunks), or dump a snapshot on OOM (torch.cuda.memory._record_memory_history) to name the line.", req)
	}
	return "The message does not hold enough to say more: paste the whole message, or dump a snapshot on OOM (torch.cuda.memory._record_memory_history) and run vramscope explain on it."
}

// segmentMeaning says what request a segment size implies.
func segmentMeaning(seg uint64) string {
	switch seg {
	case allocator.SmallBuffer:
		return "a request of at most 1 MiB, for the small pool"
	case allocator.LargeBuffer:
		return "a request between 1 and 10 MiB, or of 20 MiB"
	}
	return "a request of about that size, rounded up to 2 MiB"
}

func sz(b int64) string { return units.Bytes(b).String() }

func pct(share float64) int { return int(share*100 + 0.5) }

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
