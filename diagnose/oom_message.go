package diagnose

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/memlog"
)

// MessageReport explains an out-of-memory message pasted from a log,
// without a snapshot: only the message's facts are known. The derived
// facts are nil where the message lacks what they derive from.
type MessageReport struct {
	Message memlog.OOMMessage `json:"message"`

	// ThisProcessBytes is this process's NVML usage: the message's "this
	// process has", or in a container (where NVML's pids are the host's
	// and torch cannot tell its own) the listed process whose usage is
	// just above PyTorch's reserve, ThisProcessPID.
	ThisProcessBytes *int64 `json:"this_process_bytes"`
	ThisProcessPID   *int   `json:"this_process_pid"`
	// OtherProcesses are the listed processes other than this one, and
	// OtherProcessesBytes their sum.
	OtherProcesses      []memlog.ProcessMemory `json:"other_processes"`
	OtherProcessesBytes *int64                 `json:"other_processes_bytes"`
	// NonPyTorchBytes is this process's memory outside the caching
	// allocator (CUDA context, cuBLAS/NCCL workspaces): its usage minus
	// PyTorch's reserve.
	NonPyTorchBytes *int64 `json:"non_pytorch_bytes"`
	// OutsideProcessBytes is the GPU memory in use by anything but this
	// process: capacity − free − this process's usage (its reserve where
	// the usage is not known, so that figure includes its CUDA context).
	OutsideProcessBytes *int64 `json:"outside_process_bytes"`
	// RequestExceedsDevice: the request is larger than the whole GPU.
	RequestExceedsDevice *bool `json:"request_exceeds_device"`
	// FreeAboveRequest: the device reported more free memory than the
	// request, so the device itself was not full.
	FreeAboveRequest *bool `json:"free_above_request"`

	OOMCause
	Explanation string `json:"explanation"`
	// Fix is what to change: the explanation's advice, or all of it where
	// the explanation is advice (errors outside the allocator).
	Fix string `json:"fix"`
}

// ExplainMessage explains one parsed OOM message.
func ExplainMessage(m memlog.OOMMessage) *MessageReport {
	r := &MessageReport{Message: m, OtherProcesses: []memlog.ProcessMemory{}}
	o := oomFacts{
		segment:       i64(m.TriedToAllocate),
		capacity:      i64(m.TotalCapacity),
		free:          i64(m.Free),
		allowed:       i64(m.Allowed),
		thisProcess:   i64(m.ThisProcess),
		allocated:     i64(m.Allocated),
		reserved:      i64(m.Reserved),
		trapped:       i64(m.ReservedUnallocated),
		privatePools:  i64(m.PrivatePools),
		noReserve:     m.Source == memlog.MallocAsync,
		platformLimit: m.PlatformLimit,
		capHidden:     m.Wording == memlog.CapactyWording,
	}
	// NVML's usage below PyTorch's own reserve is not a reading (WSL
	// prints 0 bytes).
	if o.thisProcess != nil && o.reserved != nil && *o.thisProcess < *o.reserved-slack {
		o.thisProcess = nil
	}
	self := -1
	if o.thisProcess == nil {
		if i, ok := selfFromList(m); ok {
			self = i
			o.thisProcess = new(int64(m.Processes[i].InUse))
			r.ThisProcessPID = &m.Processes[i].PID
		}
	}
	var others []string
	for i, p := range m.Processes {
		if i == self {
			continue
		}
		r.OtherProcesses = append(r.OtherProcesses, p)
		o.others = new(deref(o.others) + int64(p.InUse))
		others = append(others, fmt.Sprintf("process %d: %s", p.PID, p.InUse))
	}
	o.otherList = strings.Join(others, ", ")

	r.ThisProcessBytes = o.thisProcess
	r.OtherProcessesBytes = o.others
	r.NonPyTorchBytes = o.nonPyTorch()
	if o.capacity != nil && o.free != nil {
		switch {
		case o.thisProcess != nil:
			r.OutsideProcessBytes = new(*o.capacity - *o.free - *o.thisProcess)
		case o.used() != nil:
			r.OutsideProcessBytes = new(*o.capacity - *o.free - *o.used())
		}
	}
	if o.segment != nil && o.capacity != nil {
		r.RequestExceedsDevice = new(*o.segment > *o.capacity)
	}
	if o.segment != nil && o.free != nil {
		r.FreeAboveRequest = new(*o.free > *o.segment)
	}

	if w, ok := vllmWrapper(m); ok {
		r.OOMCause = OOMCause{Cause: CausePeak, Contributing: []Cause{}, Because: []string{w}}
		r.Explanation = "vLLM raised this for " + w + ": the dummy batch it runs at start-up to reserve memory for the sampler did not fit beside the KV cache and the model. Lower max_num_seqs (the dummy batch) or gpu_memory_utilization (the KV cache's share), or use a GPU with more memory."
		return r
	}
	if isTHC(m) {
		r.OOMCause = OOMCause{Cause: CauseUnknown, Contributing: []Cause{}, Because: []string{"torch 0.4 and older print no numbers"}}
		r.Explanation = outsideExplanation(m)
		return r
	}
	if m.Source == memlog.CachingAllocator || m.Source == memlog.MallocAsync {
		r.OOMCause = o.decide()
		r.Explanation = o.paragraph(r.OOMCause)
		r.Fix = o.remedy(r.OOMCause)
		if m.Source == memlog.MallocAsync {
			r.Explanation = "PyTorch ran with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, whose message this is: the driver's memory pool served PyTorch's allocations, and its cache is not in the numbers. " + r.Explanation
		}
		if len(m.Missing) > 0 {
			r.Explanation += " The message lacks " + strings.Join(m.Missing, ", ") + ": it was probably cut short."
		}
		return r
	}
	r.OOMCause = OOMCause{Cause: CauseOutsideAllocator, Contributing: []Cause{}, Because: []string{outsideWhy(m)}}
	r.Explanation = outsideExplanation(m)
	return r
}

// selfFromList finds this process in a message without "this process":
// the listed process whose usage is at least PyTorch's reserve (or its
// allocations, when the reserve was cut off) by the least, provided the
// difference is a plausible context and library overhead.
func selfFromList(m memlog.OOMMessage) (int, bool) {
	floor := m.Reserved
	if floor == nil {
		floor = m.Allocated
	}
	if floor == nil {
		return 0, false
	}
	best, ok := 0, false
	for i, p := range m.Processes {
		over := p.InUse - *floor
		if over < -slack || over > max(plausibleOverhead, *floor/4) {
			continue
		}
		if !ok || p.InUse < m.Processes[best].InUse {
			best, ok = i, true
		}
	}
	return best, ok
}

// outsideWhy is the one-line reason for an OOM raised outside PyTorch's
// allocators.
func outsideWhy(m memlog.OOMMessage) string {
	switch m.Source {
	case memlog.LibraryOOM:
		return m.Library + " could not allocate its own memory (" + firstWord(m.Text) + ")"
	case memlog.NCCL:
		if m.TriedToAllocate != nil {
			return "NCCL could not allocate a " + m.TriedToAllocate.String() + " buffer"
		}
		return "NCCL could not allocate its buffers"
	}
	return "a CUDA call outside PyTorch's allocator ran out of memory (" + m.Text + ")"
}

// outsideExplanation says what each non-allocator OOM is and what helps.
func outsideExplanation(m memlog.OOMMessage) string {
	const full = "The GPU was full when it happened: PyTorch's cache, other processes or this process's other libraries held the memory. "
	switch m.Source {
	case memlog.LibraryOOM:
		return m.Library + " allocates its handle and workspace with cudaMalloc, outside PyTorch's allocator, the first time a kernel needs them on a device or stream. " + full +
			"Leave it room: lower the peak or the batch, set torch.cuda.set_per_process_memory_fraction below 1 so PyTorch's cache stops short of the whole GPU, or run one small matmul before the big allocations so the workspace exists first. With an old torch, the same error also comes from a CUDA toolkit the build does not support."
	case memlog.NCCL:
		return "NCCL allocates its communication buffers with cudaMalloc, outside PyTorch's allocator, when a communicator is created or a collective first runs. " + full +
			"Create the process group and run one collective before loading the model, lower NCCL_BUFFSIZE or the number of channels (NCCL_MAX_NCHANNELS), leave PyTorch's cache room with set_per_process_memory_fraction, and check nvidia-smi for other processes on the GPU."
	}
	if isTHC(m) {
		return "This is torch 0.4's caching allocator running out (THC): it printed no numbers, so nothing tells where the memory was. Lower the peak (batch, sequence length), and with a newer torch the message would say how much was allocated and reserved."
	}
	return "A CUDA call outside PyTorch's allocator failed for lack of memory: creating the CUDA context, a kernel's or library's own cudaMalloc (cuDNN, a custom extension, CuPy, Triton), or memory asked for by another framework in the process. Kernel errors are reported asynchronously, so the line in the traceback may not be the culprit; rerun with CUDA_LAUNCH_BLOCKING=1 to find it. " + full +
		"If it fails at startup, another process probably holds the GPU (nvidia-smi) or the code creates contexts on several GPUs (set CUDA_VISIBLE_DEVICES)."
}

// isTHC tells torch ≤ 0.4's "cuda runtime error (2)" raised in THC, its
// caching allocator or storage code.
func isTHC(m memlog.OOMMessage) bool {
	return m.Source == memlog.CUDARuntime && strings.Contains(m.Text, "THC")
}

// vllmWrapper reads vLLM's replacement of the allocator's message ("CUDA
// out of memory occurred when warming up sampler with 1024 dummy
// requests"), returning what ran out.
func vllmWrapper(m memlog.OOMMessage) (string, bool) {
	const prefix = "CUDA out of memory occurred when "
	if m.Source != memlog.CachingAllocator || !strings.HasPrefix(m.Text, prefix) {
		return "", false
	}
	what, _, _ := strings.Cut(strings.TrimPrefix(m.Text, prefix), ".")
	return what, true
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

// Finding is the message's OOM finding; where names the file it came from.
func (r *MessageReport) Finding(where string) Finding {
	m := r.Message
	ev := map[string]any{
		"source":          where,
		"line":            m.Line,
		"raised_by":       m.Source.String(),
		"callsite_reason": "an OOM message has no stack: dump a snapshot on OOM to name the line",
	}
	r.OOMCause.evidence(ev)
	if m.Wording != memlog.NoWording {
		ev["wording"] = m.Wording.String()
	}
	put := func(key string, v *int64) {
		if v != nil {
			ev[key] = *v
		}
	}
	put("tried_to_allocate_bytes", i64(m.TriedToAllocate))
	put("total_capacity_bytes", i64(m.TotalCapacity))
	put("free_bytes", i64(m.Free))
	put("allowed_bytes", i64(m.Allowed))
	put("allocated_bytes", i64(m.Allocated))
	put("private_pools_bytes", i64(m.PrivatePools))
	put("reserved_bytes", i64(m.Reserved))
	put("reserved_unallocated_bytes", i64(m.ReservedUnallocated))
	put("this_process_bytes", r.ThisProcessBytes)
	put("other_processes_bytes", r.OtherProcessesBytes)
	put("non_pytorch_bytes", r.NonPyTorchBytes)
	put("outside_process_bytes", r.OutsideProcessBytes)
	if len(m.Missing) > 0 {
		ev["missing"] = m.Missing
	}
	if len(m.Also) > 0 {
		ev["also_at_lines"] = m.Also
	}
	f := Finding{
		Kind:     KindOOM,
		Severity: High,
		Title:    r.title(),
		Stack:    []Frame{},
		Evidence: ev,
		Fix:      cmp.Or(r.Fix, r.Explanation),
	}
	if m.TriedToAllocate != nil {
		f.Bytes = int64(*m.TriedToAllocate)
	}
	if m.Device != nil {
		f.Device = *m.Device
	}
	return f
}

func (r *MessageReport) title() string {
	m := r.Message
	var b strings.Builder
	switch m.Source {
	case memlog.LibraryOOM:
		b.WriteString(m.Library + " out of memory")
	case memlog.NCCL:
		b.WriteString("NCCL out of memory")
	case memlog.CUDARuntime:
		b.WriteString("CUDA error: out of memory")
	default:
		b.WriteString("out of memory")
	}
	if m.Device != nil {
		fmt.Fprintf(&b, " on GPU %d", *m.Device)
	}
	if m.TriedToAllocate != nil {
		fmt.Fprintf(&b, ": %s could not be allocated", m.TriedToAllocate)
	}
	fmt.Fprintf(&b, " (cause: %s)", r.Cause)
	return b.String()
}

func i64(b *units.Bytes) *int64 {
	if b == nil {
		return nil
	}
	return new(int64(*b))
}
