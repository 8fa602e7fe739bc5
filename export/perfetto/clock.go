package perfetto

import (
	"math"

	"github.com/vramscope/vramscope/replay"
)

// clock maps event times to trace timestamps: microseconds since origin,
// the earliest time of all processes.
type clock struct {
	origin int64
}

func newClock(procs []Process) *clock {
	origin := int64(math.MaxInt64)
	for _, p := range procs {
		for _, t := range p.Timelines {
			if t.Trace.Len() > 0 {
				if us := t.Trace.At(0).TimeUS; us > 0 {
					origin = min(origin, us)
				}
			}
		}
		for _, a := range p.Snapshot.Annotations {
			if a.TimeUS > 0 {
				origin = min(origin, a.TimeUS)
			}
		}
	}
	if origin == math.MaxInt64 {
		origin = 0 // nothing is timed
	}
	return &clock{origin: origin}
}

// abs returns the timestamp of a Unix time in microseconds.
func (c *clock) abs(us int64) int64 { return us - c.origin }

// at returns the timestamp of t's event i, clamped to the trace: before
// the first event is the first event, LiveAtEnd the last. An untimed trace
// (torch < 2.2 writes time_us 0) counts events instead.
func (c *clock) at(t *replay.Timeline, i int) int64 {
	n := t.Trace.Len()
	if n == 0 {
		return 0
	}
	i = min(max(i, 0), n-1)
	if t.Trace.At(0).TimeUS == 0 {
		return int64(i)
	}
	return c.abs(t.Trace.At(i).TimeUS)
}
