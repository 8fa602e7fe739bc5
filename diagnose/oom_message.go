package diagnose

import (
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/memlog"
)

// MessageReport explains an OOM message pasted from a log, without a
// snapshot: only the message's numbers are known.
type MessageReport struct {
	Message memlog.OOMMessage `json:"message"`
	// SegmentSize is "Tried to allocate": the allocation size the
	// allocator asked cudaMalloc for, not the tensor's size.
	SegmentSize uint64 `json:"segment_bytes"`
	// Trapped is "reserved by PyTorch but unallocated".
	Trapped int64 `json:"trapped_bytes"`
	// NonPyTorch is this process's memory outside the caching allocator
	// (CUDA context, cuBLAS/NCCL workspaces): its NVML usage minus
	// reserved. -1 when the message does not say which process is this one.
	NonPyTorch int64 `json:"non_pytorch_bytes"`
	// FractionLimited: the message has an "allowed" clause.
	FractionLimited bool   `json:"fraction_limited"`
	Explanation     string `json:"explanation"`
}

// ExplainMessage explains one parsed OOM message.
func ExplainMessage(m memlog.OOMMessage) *MessageReport {
	r := &MessageReport{
		Message:         m,
		SegmentSize:     uint64(max(m.TriedToAllocate, 0)),
		Trapped:         int64(m.ReservedUnallocated),
		NonPyTorch:      -1,
		FractionLimited: m.Allowed > 0,
	}
	// A single process line is this process: NVML lists only processes
	// on the GPU, and the one that raised the error is always among them.
	if len(m.Processes) == 1 || (len(m.Processes) > 0 && m.Processes[0].PID == 0) {
		r.NonPyTorch = int64(m.Processes[0].InUse - m.Reserved)
	}
	o := oomFacts{
		segment:    r.SegmentSize,
		allocated:  int64(m.Allocated),
		reserved:   int64(m.Reserved),
		trapped:    r.Trapped,
		deviceFree: uint64(max(m.Free, 0)),
		allowed:    int64(m.Allowed),
		fraction:   r.FractionLimited,
	}
	r.Explanation = o.paragraph()
	if r.NonPyTorch > int64(units.GiB) {
		r.Explanation += " This process also uses " + units.Bytes(r.NonPyTorch).String() + " outside PyTorch's allocator (CUDA context, cuBLAS or NCCL workspaces, other libraries)."
	}
	return r
}
