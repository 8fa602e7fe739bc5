package perfetto

import (
	"github.com/vramscope/vramscope/replay"
)

// counterMetrics are the series drawn per device. Requested is left out:
// it differs from allocated only by rounding, which the stats command
// reports as one number.
var counterMetrics = []replay.Metric{replay.Allocated, replay.Active, replay.Reserved}

// counters writes t's series as counter events. Perfetto names a counter
// track "<event name> <arg name>", so each point is {"name": "cuda:N",
// "args": {"allocated": bytes}}. The first point is the state before the
// first event, so an initial maximum survives too.
func (pw *processWriter) counters(t *replay.Timeline) {
	name := device(t)
	point := func(m replay.Metric, ts, v int64) {
		pw.ew.emit(&event{Name: name, Ph: "C", TS: ts, PID: pw.pid, Args: map[string]int64{m.String(): v}})
	}
	for _, m := range counterMetrics {
		point(m, pw.clk.at(t, 0), t.Value(m, replay.BeforeRecording))
		for _, b := range t.Downsample(m, max(pw.opt.Points/2, 1)) {
			first, last := pw.clk.at(t, b.First), pw.clk.at(t, b.Last)
			if b.First == b.Last {
				point(m, first, b.Max)
				continue
			}
			// Which extreme came first is not known; ending on the one
			// nearer the bucket's last value keeps the line continuous
			// into the next bucket.
			from, to := b.Min, b.Max
			if end := t.Value(m, b.Last); end-b.Min < b.Max-end {
				from, to = b.Max, b.Min
			}
			point(m, first, from)
			point(m, last, to)
		}
	}
}
