package follow

import (
	"github.com/prometheus/client_golang/prometheus"
)

// poolLabels name a pool's series: the engine's name for the pool, the
// engine, and the rank its lines name ("DP1 TP0", "Engine 000", "" for
// one).
var poolLabels = []string{"pool", "engine", "rank"}

var (
	poolUsed     = prometheus.NewDesc("vramscope_pool_used_tokens", "Pool slots in use by running requests and locked prefix cache at the last stats line of the serving log (evictable cache counts as free).", poolLabels, nil)
	poolFloor    = prometheus.NewDesc("vramscope_pool_floor_tokens", "The latest floor of used slots at the lowest load level the log shows: what a healthy pool returns to.", poolLabels, nil)
	poolCapacity = prometheus.NewDesc("vramscope_pool_capacity_tokens", "The pool's size, as the engine's startup line or idle check gives it.", poolLabels, nil)
	poolLeak     = prometheus.NewDesc("vramscope_pool_leak_suspected", "1 while the pools verdict finds the pool leaking (the floor climbs or steps up and stays, or the idle check failed), else 0.", poolLabels, nil)
	poolLeaked   = prometheus.NewDesc("vramscope_pool_leaked_tokens", "The verdict's estimate of slots held by no request (exact from an idle check); 0 when not leaking.", poolLabels, nil)
	logLines     = prometheus.NewDesc("vramscope_pool_log_lines_total", "Lines read from the followed serving log.", nil, nil)
	logUnparsed  = prometheus.NewDesc("vramscope_pool_log_unparsed_lines_total", "Lines of the followed log that looked like pool stats but could not be read.", nil, nil)
	logUp        = prometheus.NewDesc("vramscope_pool_log_up", "1 when the followed log could be read at the last look, else 0.", nil, nil)
)

// StateSource is what the collector reads: *Follower.
type StateSource interface {
	State() State
}

// Collector turns a follower's state into metrics, beside watch's GPU
// ones. Pool slots are tokens for a KV pool and requests for SGLang's
// req_to_token_pool; vLLM's log without a pool size counts tenths of a
// percent.
type Collector struct {
	src StateSource
}

// NewCollector returns a collector of src's state.
func NewCollector(src StateSource) *Collector {
	return &Collector{src: src}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolUsed, poolFloor, poolCapacity, poolLeak, poolLeaked, logLines, logUnparsed, logUp} {
		ch <- d
	}
}

// Collect sends the metrics of the follower's current state.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.State()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, p := range st.Pools {
		l := []string{p.Pool, p.Engine, p.Rank}
		if p.Used >= 0 {
			gauge(poolUsed, float64(p.Used), l...)
		}
		if p.Floor >= 0 {
			gauge(poolFloor, float64(p.Floor), l...)
		}
		if p.Capacity > 0 {
			gauge(poolCapacity, float64(p.Capacity), l...)
		}
		leak := 0.0
		if p.Leak {
			leak = 1
		}
		gauge(poolLeak, leak, l...)
		gauge(poolLeaked, float64(p.Leaked), l...)
	}
	ch <- prometheus.MustNewConstMetric(logLines, prometheus.CounterValue, float64(st.Lines))
	ch <- prometheus.MustNewConstMetric(logUnparsed, prometheus.CounterValue, float64(st.Unparsed))
	up := 1.0
	if st.Err != "" {
		up = 0
	}
	gauge(logUp, up)
}
