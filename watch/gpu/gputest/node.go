// Package gputest scripts a node of GPUs behind go-nvml's mock package, so
// that the sampler, the agent and its metrics are tested without a GPU:
// processes start, grow and end, NVML calls fail, a GPU gets lost.
package gputest

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// MiB is 1 << 20 bytes.
const MiB = 1 << 20

// ContextBytes is what each device uses with no process on it (the
// driver's reservation), so that used memory is never just the sum of
// the processes.
const ContextBytes = 512 * MiB

// Node is a scripted machine. Its methods are safe to call while a
// sampler reads it.
type Node struct {
	mu     sync.Mutex
	gpus   []*GPU
	Driver string
	// CountErr fails DeviceGetCount when not SUCCESS.
	CountErr nvml.Return
	// InitErr fails Init (ERROR_LIBRARY_NOT_FOUND: no driver).
	InitErr nvml.Return
}

// GPU is one scripted device.
type GPU struct {
	UUID, Name string
	PCIBusID   string
	Total      uint64
	// Lost makes every call about the device fail with ERROR_GPU_IS_LOST,
	// as NVML does after an Xid 79.
	Lost bool
	// Fail makes the named method (GetMemoryInfo,
	// GetComputeRunningProcesses, ...) return this error.
	Fail map[string]nvml.Return
	// Procs is each pid's used bytes; Instance puts a pid in a MIG
	// instance of a partitioned GPU.
	Procs    map[uint32]uint64
	Instance map[uint32]int
	// MIG lists the instances of a partitioned GPU (nil: not partitioned).
	MIG []MIGInstance
}

// MIGInstance is one scripted GPU instance.
type MIGInstance struct {
	ID      int
	Profile string
	Total   uint64
}

// NewNode makes a node of n H100s with no process, driver 550.54.15.
func NewNode(n int) *Node {
	node := &Node{Driver: "550.54.15"}
	for i := range n {
		node.gpus = append(node.gpus, &GPU{
			UUID:     fmt.Sprintf("GPU-%08x-0000-0000-0000-00000000000%d", 0xabcd0000+i, i),
			Name:     "NVIDIA H100 80GB HBM3",
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i),
			Total:    80 * 1024 * MiB,
			Procs:    map[uint32]uint64{},
			Instance: map[uint32]int{},
			Fail:     map[string]nvml.Return{},
		})
	}
	return node
}

// Update changes GPU i under the node's lock.
func (n *Node) Update(i int, f func(g *GPU)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n.gpus[i])
}

// Set puts pid on GPU i with used bytes (starting it if it was not there).
func (n *Node) Set(i int, pid uint32, used uint64) {
	n.Update(i, func(g *GPU) { g.Procs[pid] = used })
}

// End removes pid from GPU i: the process exited.
func (n *Node) End(i int, pid uint32) {
	n.Update(i, func(g *GPU) { delete(g.Procs, pid) })
}

// Lib is the node as go-nvml's mock.Interface.
func (n *Node) Lib() *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return orSuccess(n.InitErr) },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) {
			return n.Driver, nvml.SUCCESS
		},
		DeviceGetCountFunc: func() (int, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.CountErr != nvml.SUCCESS {
				return 0, n.CountErr
			}
			return len(n.gpus), nvml.SUCCESS
		},
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if i < 0 || i >= len(n.gpus) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			g := n.gpus[i]
			if g.Lost {
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return n.device(i, g), nvml.SUCCESS
		},
	}
}

func orSuccess(r nvml.Return) nvml.Return {
	if r == 0 {
		return nvml.SUCCESS
	}
	return r
}

// check is the error a call on g returns: lost, or scripted to fail.
// The caller holds n.mu.
func (g *GPU) check(op string) nvml.Return {
	if g.Lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	if r, ok := g.Fail[op]; ok {
		return r
	}
	return nvml.SUCCESS
}

// device is GPU i as a mock device; every method reads the script under
// the node's lock when called.
func (n *Node) device(i int, g *GPU) *mock.Device {
	locked := func(op string) (*GPU, func(), nvml.Return) {
		n.mu.Lock()
		return g, n.mu.Unlock, g.check(op)
	}
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) {
			g, unlock, r := locked("GetUUID")
			defer unlock()
			return g.UUID, r
		},
		GetNameFunc: func() (string, nvml.Return) {
			g, unlock, r := locked("GetName")
			defer unlock()
			return g.Name, r
		},
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			g, unlock, r := locked("GetPciInfo")
			defer unlock()
			var info nvml.PciInfo
			for k, c := range []byte(g.PCIBusID) {
				info.BusId[k] = int8(c)
			}
			return info, r
		},
		GetMinorNumberFunc: func() (int, nvml.Return) {
			_, unlock, r := locked("GetMinorNumber")
			defer unlock()
			return i, r
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			g, unlock, r := locked("GetMemoryInfo")
			defer unlock()
			return memory(g.Total, g.Procs, func(uint32) bool { return true }), r
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			g, unlock, r := locked("GetMigMode")
			defer unlock()
			if r != nvml.SUCCESS {
				return 0, 0, r
			}
			if g.MIG == nil {
				return 0, 0, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			g, unlock, r := locked("GetComputeRunningProcesses")
			defer unlock()
			if r != nvml.SUCCESS {
				return nil, r
			}
			return processInfos(g.Procs, func(uint32) bool { return true }), nvml.SUCCESS
		},
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) {
			_, unlock, r := locked("GetMaxMigDeviceCount")
			defer unlock()
			return 7, r
		},
		GetMigDeviceHandleByIndexFunc: func(k int) (nvml.Device, nvml.Return) {
			g, unlock, r := locked("GetMigDeviceHandleByIndex")
			defer unlock()
			if r != nvml.SUCCESS {
				return nil, r
			}
			if k >= len(g.MIG) {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return n.migDevice(g, g.MIG[k]), nvml.SUCCESS
		},
	}
}

// migDevice is one MIG instance of g as a mock device.
func (n *Node) migDevice(g *GPU, m MIGInstance) *mock.Device {
	in := func(pid uint32) bool { return g.Instance[pid] == m.ID }
	return &mock.Device{
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return m.ID, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) {
			return g.Name + " MIG " + m.Profile, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return memory(m.Total, g.Procs, in), g.check("GetMemoryInfo")
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return processInfos(g.Procs, in), g.check("GetComputeRunningProcesses")
		},
	}
}

func memory(total uint64, procs map[uint32]uint64, in func(uint32) bool) nvml.Memory {
	used := uint64(ContextBytes)
	for pid, b := range procs {
		if in(pid) {
			used += b
		}
	}
	used = min(used, total)
	return nvml.Memory{Total: total, Used: used, Free: total - used}
}

// processInfos lists the processes in pid order, as NVML's order is not
// one a test should depend on anyway.
func processInfos(procs map[uint32]uint64, in func(uint32) bool) []nvml.ProcessInfo {
	var out []nvml.ProcessInfo
	for _, pid := range slices.Sorted(maps.Keys(procs)) {
		if in(pid) {
			out = append(out, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: procs[pid]})
		}
	}
	return out
}
