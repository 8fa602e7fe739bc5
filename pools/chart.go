package pools

import (
	"math"
	"strconv"
	"time"
)

// Chart is what a report draws of one rank's pool: its use over the log,
// the floors the verdict judged and the leak's onset. It is the report
// payload's "pools" entry (README, JSON section).
type Chart struct {
	Source   string `json:"source"`
	Pool     string `json:"pool"`
	Engine   Engine `json:"engine"`
	Rank     string `json:"rank"`
	Unit     string `json:"unit"`
	Capacity int64  `json:"capacity"`
	// XUnit is "s" when X counts seconds from Start (the log's first time
	// stamp, as the log prints it), "line" when the log has no time.
	XUnit string `json:"x_unit"`
	Start string `json:"start"`
	// X is each bucket's start; UsedMin and UsedMax the least and most
	// used in it, so that every dip to the floor and every peak shows.
	X       []float64 `json:"x"`
	UsedMin []int64   `json:"used_min"`
	UsedMax []int64   `json:"used_max"`
	// FloorX and Floor are the floors at FloorRunning requests
	// (Floors), one per window.
	FloorX       []float64 `json:"floor_x"`
	Floor        []int64   `json:"floor"`
	FloorRunning int       `json:"floor_running_requests"`
	// Onset is when the leak began, in X's unit; nil when the pool does
	// not leak. OnsetLabel is the same moment as the log prints it.
	Onset      *float64 `json:"onset"`
	OnsetLabel string   `json:"onset_label"`
}

// ChartOf charts the series of sr in buckets of equal time; lk, when not
// nil, is its leak, whose floors and onset it draws.
func (l *Log) ChartOf(source string, sr Series, lk *Leak, buckets int) Chart {
	c := Chart{Source: source, Pool: "token_to_kv_pool", Engine: l.Engine, Rank: sr.Rank, Unit: l.Unit(), Capacity: l.poolSize(),
		XUnit: "line", X: []float64{}, UsedMin: []int64{}, UsedMax: []int64{}, FloorX: []float64{}, Floor: []int64{}}
	if l.Engine == VLLM {
		c.Pool = "kv_cache"
	}
	if l.HasTime {
		c.XUnit, c.Start = "s", l.Start.Format(l.Layout)
	}
	ss := sr.Samples
	if len(ss) == 0 {
		return c
	}
	lo, hi := ss[0].At, ss[len(ss)-1].At
	width := (hi - lo) / float64(buckets)
	b := -1
	for _, s := range ss {
		k := 0
		if width > 0 {
			k = min(int((s.At-lo)/width), buckets-1)
		}
		if k != b || len(c.X) == 0 {
			b = k
			c.X = append(c.X, lo+float64(k)*width)
			c.UsedMin, c.UsedMax = append(c.UsedMin, s.Used), append(c.UsedMax, s.Used)
			continue
		}
		n := len(c.X) - 1
		c.UsedMin[n], c.UsedMax[n] = min(c.UsedMin[n], s.Used), max(c.UsedMax[n], s.Used)
	}
	var fl Floor
	if lk != nil && lk.Floors != nil {
		fl = Floor{Points: lk.Floors, Level: lk.Level}
	} else {
		fl = Floors(ss)
	}
	for _, p := range fl.Points {
		c.FloorX, c.Floor = append(c.FloorX, p.At), append(c.Floor, p.Used)
	}
	c.FloorRunning = fl.Level
	if lk != nil {
		onset := math.Round(lk.Onset*1000) / 1000
		c.Onset = &onset
		c.OnsetLabel = "line " + strconv.Itoa(int(lk.Onset))
		if l.HasTime {
			c.OnsetLabel = l.Start.Add(time.Duration(lk.Onset * float64(time.Second))).Format(l.Layout)
		}
	}
	return c
}
