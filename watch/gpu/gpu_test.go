package gpu_test

import (
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/gpu/gputest"
)

const MiB = gputest.MiB

func TestNoDriver(t *testing.T) {
	node := gputest.NewNode(1)
	node.InitErr = nvml.ERROR_LIBRARY_NOT_FOUND
	if _, err := gpu.Open(node.Lib()); !errors.Is(err, gpu.ErrNoDriver) {
		t.Fatalf("Open without a driver: %v, want ErrNoDriver", err)
	}
}

func open(t *testing.T, node *gputest.Node) *gpu.Sampler {
	t.Helper()
	s, err := gpu.Open(node.Lib())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sample(t *testing.T, s *gpu.Sampler) gpu.Sample {
	t.Helper()
	smp, err := s.Sample(time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	return smp
}

func TestSample(t *testing.T) {
	node := gputest.NewNode(2)
	node.Set(0, 100, 3000*MiB)
	node.Set(0, 101, 500*MiB)
	node.Set(1, 200, 1000*MiB)
	s := open(t, node)
	if s.Driver() != "550.54.15" {
		t.Errorf("driver %q", s.Driver())
	}
	smp := sample(t, s)
	if len(smp.Devices) != 2 || len(smp.Errors) != 0 {
		t.Fatalf("devices %d errors %v", len(smp.Devices), smp.Errors)
	}
	d := smp.Devices[0]
	if !d.Up || d.UUID != "GPU-abcd0000-0000-0000-0000-000000000000" || d.PCIBusID != "00000000:18:00.0" || d.Minor != 0 {
		t.Errorf("device 0: %+v", d)
	}
	if want := uint64(gputest.ContextBytes + 3500*MiB); d.Memory.Used != want || d.Memory.Free != d.Memory.Total-want {
		t.Errorf("memory %+v, want used %d", d.Memory, want)
	}
	want := []gpu.Process{{PID: 100, UsedBytes: 3000 * MiB, Instance: -1}, {PID: 101, UsedBytes: 500 * MiB, Instance: -1}}
	if len(d.Processes) != 2 || d.Processes[0] != want[0] || d.Processes[1] != want[1] {
		t.Errorf("processes %+v, want %+v", d.Processes, want)
	}
}

// A lost GPU is reported down with its identity, the other keeps being
// read, and the lost one is back when NVML sees it again.
func TestLostGPU(t *testing.T) {
	node := gputest.NewNode(2)
	node.Set(0, 100, 1000*MiB)
	node.Set(1, 200, 1000*MiB)
	s := open(t, node)
	sample(t, s)
	node.Update(0, func(g *gputest.GPU) { g.Lost = true })
	smp := sample(t, s)
	d := smp.Devices[0]
	if d.Up || d.UUID == "" || d.Err == "" || len(d.Processes) != 0 {
		t.Errorf("lost device: %+v", d)
	}
	if !smp.Devices[1].Up || len(smp.Devices[1].Processes) != 1 {
		t.Errorf("other device: %+v", smp.Devices[1])
	}
	if len(smp.Errors) != 1 || smp.Errors[0].Ret != nvml.ERROR_GPU_IS_LOST || smp.Errors[0].Device != 0 {
		t.Errorf("errors %v", smp.Errors)
	}
	node.Update(0, func(g *gputest.GPU) { g.Lost = false })
	if d := sample(t, s).Devices[0]; !d.Up || len(d.Processes) != 1 {
		t.Errorf("device back: %+v", d)
	}
}

func TestErrors(t *testing.T) {
	node := gputest.NewNode(1)
	s := open(t, node)
	node.Update(0, func(g *gputest.GPU) { g.Fail["GetComputeRunningProcesses"] = nvml.ERROR_UNKNOWN })
	smp := sample(t, s)
	if smp.Devices[0].Up || len(smp.Errors) != 1 || smp.Errors[0].Op != "GetComputeRunningProcesses" {
		t.Errorf("device %+v errors %v", smp.Devices[0], smp.Errors)
	}
	node.CountErr = nvml.ERROR_UNKNOWN
	if _, err := s.Sample(time.Now()); err == nil {
		t.Error("DeviceGetCount failing: no error")
	}
}

func TestMIG(t *testing.T) {
	node := gputest.NewNode(1)
	node.Update(0, func(g *gputest.GPU) {
		g.MIG = []gputest.MIGInstance{{ID: 1, Profile: "3g.40gb", Total: 40 * 1024 * MiB}, {ID: 2, Profile: "3g.40gb", Total: 40 * 1024 * MiB}}
		g.Procs[100], g.Instance[100] = 2000*MiB, 1
		g.Procs[200], g.Instance[200] = 3000*MiB, 2
	})
	d := sample(t, open(t, node)).Devices[0]
	if len(d.Instances) != 2 || d.Instances[1].Profile != "3g.40gb" || d.Instances[1].Memory.Used != gputest.ContextBytes+3000*MiB {
		t.Errorf("instances %+v", d.Instances)
	}
	if len(d.Processes) != 2 || d.Processes[0].Instance != 1 || d.Processes[1].Instance != 2 {
		t.Errorf("processes %+v", d.Processes)
	}
}
