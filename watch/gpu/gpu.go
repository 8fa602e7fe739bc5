// Package gpu reads device and per-process memory through NVML.
//
// The sampler calls a handful of NVML functions (Lib, plus nvml.Device's
// memory, process and MIG queries) so that tests drive it through
// go-nvml's own mock package with scripted devices and processes. It never
// stops on an NVML error: a failed call marks its device down for that
// sample and is counted, a lost GPU is looked up again on the next sample.
package gpu

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Lib is the part of nvml.Interface the sampler uses; nvml.New() and
// go-nvml's mock.Interface both satisfy it.
type Lib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
}

// ErrNoDriver is returned by Open when libnvidia-ml cannot be loaded: no
// NVIDIA driver on this machine (or in this container).
var ErrNoDriver = errors.New("no NVIDIA driver was found (libnvidia-ml.so.1 could not be loaded)")

// Memory is a device's or MIG instance's frame-buffer memory in bytes.
type Memory struct {
	Total, Free, Used uint64
}

// Process is one compute process's use of one device.
type Process struct {
	PID       uint32
	UsedBytes uint64
	// Instance is the MIG GPU instance id, or -1 when the device is not
	// partitioned.
	Instance int
}

// Instance is one MIG GPU instance of a partitioned device.
type Instance struct {
	ID      int
	Profile string // "1g.10gb": the part of the MIG device's name after "MIG "
	Memory  Memory
}

// Device is one GPU's identity and what a sample read from it.
type Device struct {
	Index    int
	UUID     string
	Name     string
	PCIBusID string
	Minor    int // /dev/nvidiaN
	// Up is false when the sample could not read the device (lost, or
	// NVML failing); Err then says why and the figures are zero.
	Up        bool
	Err       string
	Memory    Memory
	Instances []Instance
	Processes []Process
}

// OpError is one failed NVML call of a sample.
type OpError struct {
	Device int // -1 for calls not about one device
	Op     string
	Ret    nvml.Return
}

func (e OpError) Error() string {
	if e.Device < 0 {
		return fmt.Sprintf("nvml %s: %v", e.Op, e.Ret)
	}
	return fmt.Sprintf("gpu %d: nvml %s: %v", e.Device, e.Op, e.Ret)
}

// Sample is one reading of every device.
type Sample struct {
	Time    time.Time
	Driver  string
	Devices []Device
	Errors  []OpError
}

// Sampler reads samples from an initialized NVML.
type Sampler struct {
	lib    Lib
	driver string
	// static is what does not change while a device stays up, read once;
	// an entry is dropped when its device fails, so a GPU that comes back
	// (or another at its index) is named afresh.
	static map[int]*Device
}

// Open initializes lib. It returns ErrNoDriver when the NVML library is
// missing.
func Open(lib Lib) (*Sampler, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, ErrNoDriver
	default:
		return nil, fmt.Errorf("nvml init: %v", ret)
	}
	s := &Sampler{lib: lib, static: map[int]*Device{}}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		s.driver = v
	}
	return s, nil
}

// OpenNVML opens the machine's NVML (libnvidia-ml.so.1, loaded now).
func OpenNVML() (*Sampler, error) { return Open(nvml.New()) }

// Close shuts NVML down.
func (s *Sampler) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %v", ret)
	}
	return nil
}

// Driver is the driver version, "" when NVML did not say.
func (s *Sampler) Driver() string { return s.driver }

// Sample reads every device. It returns an error only when NVML cannot
// even count the devices; per-device failures are in the sample.
func (s *Sampler) Sample(now time.Time) (Sample, error) {
	smp := Sample{Time: now, Driver: s.driver}
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		smp.Errors = append(smp.Errors, OpError{-1, "DeviceGetCount", ret})
		return smp, fmt.Errorf("nvml DeviceGetCount: %v", ret)
	}
	for i := range n {
		d, errs := s.device(i)
		smp.Devices = append(smp.Devices, d)
		smp.Errors = append(smp.Errors, errs...)
	}
	return smp, nil
}

// device reads device i; on a failure it returns the device down, with
// what is known of it.
func (s *Sampler) device(i int) (Device, []OpError) {
	fail := func(d Device, op string, ret nvml.Return) (Device, []OpError) {
		delete(s.static, i)
		d.Up, d.Err = false, fmt.Sprintf("%s: %v", op, ret)
		d.Memory, d.Instances, d.Processes = Memory{}, nil, nil
		return d, []OpError{{i, op, ret}}
	}
	h, ret := s.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		if st := s.static[i]; st != nil {
			return fail(*st, "DeviceGetHandleByIndex", ret)
		}
		return fail(Device{Index: i, Minor: -1}, "DeviceGetHandleByIndex", ret)
	}
	st := s.static[i]
	if st == nil {
		var errs []OpError
		st, errs = identify(i, h)
		if len(errs) > 0 {
			return fail(*st, errs[0].Op, errs[0].Ret)
		}
		s.static[i] = st
	}
	d := *st
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return fail(d, "GetMemoryInfo", ret)
	}
	d.Memory = Memory(mem)
	current, _, ret := h.GetMigMode()
	if ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
		var errs []OpError
		d.Instances, d.Processes, errs = migInstances(i, h)
		d.Up = true
		return d, errs
	}
	procs, ret := h.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return fail(d, "GetComputeRunningProcesses", ret)
	}
	d.Processes = processes(procs, -1)
	d.Up = true
	return d, nil
}

// identify reads what names device i.
func identify(i int, h nvml.Device) (*Device, []OpError) {
	d := &Device{Index: i, Minor: -1}
	var ret nvml.Return
	if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
		return d, []OpError{{i, "GetUUID", ret}}
	}
	d.Name, _ = h.GetName()
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		d.PCIBusID = cString(pci.BusId[:])
	}
	if m, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
		d.Minor = m
	}
	return d, nil
}

// migInstances reads the MIG instances of a partitioned device and the
// processes in each. A failing instance is skipped and reported.
func migInstances(i int, h nvml.Device) ([]Instance, []Process, []OpError) {
	n, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, nil, []OpError{{i, "GetMaxMigDeviceCount", ret}}
	}
	var ins []Instance
	var procs []Process
	var errs []OpError
	for k := range n {
		mig, ret := h.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // an empty slot
		}
		if ret != nvml.SUCCESS {
			errs = append(errs, OpError{i, "GetMigDeviceHandleByIndex", ret})
			continue
		}
		id, ret := mig.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			errs = append(errs, OpError{i, "GetGpuInstanceId", ret})
			continue
		}
		mem, ret := mig.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			errs = append(errs, OpError{i, "GetMemoryInfo", ret})
			continue
		}
		name, _ := mig.GetName()
		ins = append(ins, Instance{ID: id, Profile: migProfile(name), Memory: Memory(mem)})
		ps, ret := mig.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			errs = append(errs, OpError{i, "GetComputeRunningProcesses", ret})
			continue
		}
		procs = append(procs, processes(ps, id)...)
	}
	return ins, procs, errs
}

// processes converts NVML's list. A process whose memory NVML cannot
// report (VALUE_NOT_AVAILABLE, as in some containers) is kept at 0 bytes:
// it still exists and holds the device.
func processes(ps []nvml.ProcessInfo, instance int) []Process {
	out := make([]Process, 0, len(ps))
	for _, p := range ps {
		used := p.UsedGpuMemory
		if used == ^uint64(0) {
			used = 0
		}
		out = append(out, Process{PID: p.Pid, UsedBytes: used, Instance: instance})
	}
	return out
}

// migProfile is "1g.10gb" from "NVIDIA A100-SXM4-40GB MIG 1g.10gb".
func migProfile(name string) string {
	if _, after, ok := strings.Cut(name, "MIG "); ok {
		return after
	}
	return name
}

// cString is the text of a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
