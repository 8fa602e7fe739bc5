// Package metrics exposes the agent's state to Prometheus.
//
// Device memory keeps dcgm-exporter's names, units (MiB) and labels
// (DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE with gpu, UUID, device,
// modelName, pci_bus_id, Hostname, DCGM_FI_DRIVER_VERSION and the MIG
// instance's GPU_I_PROFILE and GPU_I_ID), so dashboards built on it keep
// working on nodes that run vramscope instead. Everything else is
// vramscope's own and follows Prometheus's conventions: base units,
// _bytes, _seconds, _total.
//
// The collector reads one copy of the agent's state per scrape and builds
// constant metrics from it, as node_exporter's collectors do: a scrape
// never waits for NVML.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vramscope/vramscope/watch/agent"
	"github.com/vramscope/vramscope/watch/verdict"
)

// StateSource is what the collector reads: *agent.Agent.
type StateSource interface {
	State() agent.State
}

const mib = 1 << 20

var (
	dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "pci_bus_id", "Hostname", "DCGM_FI_DRIVER_VERSION", "GPU_I_PROFILE", "GPU_I_ID"}
	// vramscope's own series name the GPU in snake case; gpu (the index)
	// is the label they share with dcgm-exporter's for joins.
	devLabels = []string{"gpu", "uuid", "model_name", "hostname"}
	// procLabels name a process's series. pid and command say which
	// process; rank, container and the Kubernetes pod's UID place it in
	// its job.
	procLabels = []string{"gpu", "uuid", "gpu_instance", "pid", "command", "user", "rank", "local_rank", "container", "pod_uid", "hostname"}

	fbFree = prometheus.NewDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", dcgmLabels, nil)
	fbUsed = prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", dcgmLabels, nil)

	up         = prometheus.NewDesc("vramscope_up", "1 when the last sample could read NVML, 0 when it could not count the devices.", []string{"hostname"}, nil)
	devUp      = prometheus.NewDesc("vramscope_device_up", "1 when the last sample could read the device, 0 when it could not (a lost GPU, NVML errors).", devLabels, nil)
	devTotal   = prometheus.NewDesc("vramscope_device_memory_total_bytes", "Device memory in total.", devLabels, nil)
	devUsed    = prometheus.NewDesc("vramscope_device_memory_used_bytes", "Device memory in use, by every process and the driver.", devLabels, nil)
	devFree    = prometheus.NewDesc("vramscope_device_memory_free_bytes", "Device memory free.", devLabels, nil)
	procUsed   = prometheus.NewDesc("vramscope_process_memory_used_bytes", "Device memory a process holds (NVML's used GPU memory: for PyTorch, the caching allocator's reserved memory and the CUDA context).", procLabels, nil)
	procGrowth = prometheus.NewDesc("vramscope_process_memory_growth_bytes_per_second", "Theil-Sen slope of the process's memory floors over the verdict window.", procLabels, nil)
	procSteady = prometheus.NewDesc("vramscope_process_memory_growth_steadiness", "Kendall tau of the process's memory floors over the verdict window: 1 for growth in every interval, 0 for none.", procLabels, nil)
	procLeak   = prometheus.NewDesc("vramscope_process_leak", "1 while the process's memory grows steadily (verdict leak), else 0.", procLabels, nil)
	procVerd   = prometheus.NewDesc("vramscope_process_verdict", "The process's verdict (pending, steady, warmup, leak) as a state set: 1 for the current one.", append(procLabels[:len(procLabels):len(procLabels)], "verdict"), nil)
	procSeen   = prometheus.NewDesc("vramscope_process_first_seen_timestamp_seconds", "When the process was first seen on the device.", procLabels, nil)
	procHooked = prometheus.NewDesc("vramscope_process_hooked", "1 when the process runs under vramscope's capture hook, so a leak brings its snapshot and callsite.", procLabels, nil)
	procFind   = prometheus.NewDesc("vramscope_process_findings", "Findings of high or medium severity in the process's last captured snapshot analysis.", procLabels, nil)
	procTop    = prometheus.NewDesc("vramscope_process_finding_info", "The first finding with a callsite of the process's last capture: what grows, and which line.", append(procLabels[:len(procLabels):len(procLabels)], "kind", "severity", "function", "callsite"), nil)
	procTopBPS = prometheus.NewDesc("vramscope_process_finding_bytes_per_step", "Growth per step of the process's top finding (the leak's line).", procLabels, nil)
	samples    = prometheus.NewDesc("vramscope_sample_duration_seconds", "Time taken by each sample (NVML, /proc, verdicts, history).", nil, nil)
	nvmlErrs   = prometheus.NewDesc("vramscope_nvml_errors_total", "NVML calls that failed, by call.", []string{"call"}, nil)
	captures   = prometheus.NewDesc("vramscope_captures_total", "Snapshots asked of hooked processes, by result.", []string{"result"}, nil)
)

// Collector turns the agent's state into metrics.
type Collector struct {
	src      StateSource
	hostname string
}

// New returns a collector of src's state; hostname fills the Hostname
// label, as dcgm-exporter does.
func New(src StateSource, hostname string) *Collector {
	return &Collector{src: src, hostname: hostname}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fbFree, fbUsed, up, devUp, devTotal, devUsed, devFree, procUsed, procGrowth, procSteady, procLeak, procVerd, procSeen, procHooked, procFind, procTop, procTopBPS, samples, nvmlErrs, captures} {
		ch <- d
	}
}

// Collect sends the metrics of the agent's current state.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.State()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(up, b2f(st.Up), c.hostname)
	for _, d := range st.Devices {
		gpuIdx := strconv.Itoa(d.Index)
		dev := []string{gpuIdx, d.UUID, d.Name, c.hostname}
		gauge(devUp, b2f(d.Up), dev...)
		if !d.Up {
			continue
		}
		gauge(devTotal, float64(d.Memory.Total), dev...)
		gauge(devUsed, float64(d.Memory.Used), dev...)
		gauge(devFree, float64(d.Memory.Free), dev...)
		device := "nvidia" + gpuIdx
		if d.Minor >= 0 {
			device = "nvidia" + strconv.Itoa(d.Minor)
		}
		dcgm := func(profile, id string) []string {
			return []string{gpuIdx, d.UUID, device, d.Name, d.PCIBusID, c.hostname, st.Driver, profile, id}
		}
		if len(d.Instances) == 0 {
			gauge(fbFree, float64(d.Memory.Free/mib), dcgm("", "")...)
			gauge(fbUsed, float64(d.Memory.Used/mib), dcgm("", "")...)
		}
		// dcgm-exporter reports a partitioned GPU per GPU instance.
		for _, in := range d.Instances {
			id := strconv.Itoa(in.ID)
			gauge(fbFree, float64(in.Memory.Free/mib), dcgm(in.Profile, id)...)
			gauge(fbUsed, float64(in.Memory.Used/mib), dcgm(in.Profile, id)...)
		}
	}
	for _, p := range st.Processes {
		l := c.processLabels(p)
		gauge(procUsed, float64(p.UsedBytes), l...)
		gauge(procGrowth, p.Verdict.BytesPerMinute/60, l...)
		gauge(procSteady, p.Verdict.Steadiness, l...)
		gauge(procLeak, b2f(p.Verdict.Verdict == verdict.Leak), l...)
		for _, v := range verdict.Verdicts {
			gauge(procVerd, b2f(p.Verdict.Verdict == v), append(l, string(v))...)
		}
		gauge(procSeen, float64(p.FirstSeen.UnixMilli())/1e3, l...)
		gauge(procHooked, b2f(p.Hooked), l...)
		if p.Capture == nil {
			continue
		}
		n := 0
		for _, f := range p.Capture.Findings {
			if f.Severity != "low" {
				n++
			}
		}
		gauge(procFind, float64(n), l...)
		if f := p.Capture.Top(); f != nil {
			site := f.Callsite.File + ":" + strconv.FormatUint(f.Callsite.Line, 10)
			gauge(procTop, 1, append(l, string(f.Kind), string(f.Severity), f.Callsite.Function, site)...)
			gauge(procTopBPS, float64(f.BytesPerStep), l...)
		}
	}
	ch <- prometheus.MustNewConstSummary(samples, st.Samples, st.SampleSeconds, nil)
	for call, n := range st.NVMLErrors {
		ch <- prometheus.MustNewConstMetric(nvmlErrs, prometheus.CounterValue, float64(n), call)
	}
	for _, result := range []string{"ok", "error"} {
		ch <- prometheus.MustNewConstMetric(captures, prometheus.CounterValue, float64(st.Captures[result]), result)
	}
}

func (c *Collector) processLabels(p agent.Process) []string {
	instance := ""
	if p.Instance >= 0 {
		instance = strconv.Itoa(p.Instance)
	}
	return []string{strconv.Itoa(p.GPU), p.UUID, instance, strconv.Itoa(p.PID), p.Command, p.User,
		optInt(p.Rank), optInt(p.LocalRank), p.Container, p.Pod, c.hostname}
}

func optInt(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
