// Package perfetto writes replayed snapshots as Chrome trace-event JSON,
// the format that ui.perfetto.dev and chrome://tracing open, so that memory
// over time sits on one zoomable timeline with its OOMs and annotations.
//
// Each snapshot is one process (pid 1, 2, … in the order given) named by
// the caller. Per device it gets:
//
//  1. counter tracks "cuda:N allocated", "cuda:N active" and "cuda:N
//     reserved", downsampled to at most Options.Points points per series
//     after the initial state, each bucket keeping its minimum and maximum
//     so no peak is lost;
//  2. a "cuda:N events" thread of instants: OOMs, snapshot() calls, and
//     annotations whose START or END is missing;
//  3. "cuda:N annotations" threads of record_function ranges (paired
//     START/END annotations as complete events), the Options.Annotations
//     longest;
//  4. "cuda:N blocks" threads holding the Options.Largest largest
//     allocations as complete events from alloc to free_completed, with
//     size, pool, stream and a stack summary in their args.
//
// Times are microseconds since the earliest event or annotation of all
// processes, so that snapshots of one job line up. A trace written before
// torch 2.2 has no times: its events are placed one microsecond apart.
package perfetto

import (
	"bufio"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Process is one snapshot to draw.
type Process struct {
	// Name labels the process track, e.g. "step4/actor_rank0_pid750.pickle".
	Name     string
	Snapshot *snapshot.Snapshot
	// Timelines are the devices to draw (replay.Devices, or a subset).
	Timelines []*replay.Timeline
}

// DefaultPoints is the default Options.Points: 20k points a series keeps
// the JSON of a multi-million-event trace to a few MB, which the Perfetto
// UI opens instantly, while 10k buckets still resolve every step of a
// training run of thousands of iterations.
const DefaultPoints = 20000

// DefaultAnnotations is the default Options.Annotations. A training loop
// with record_function in every layer writes millions of ranges; 100k of
// them are about 10 MB of JSON, which the Perfetto UI still loads quickly,
// and the longest ones are the steps and phases a person looks at first.
const DefaultAnnotations = 100000

// Options tunes the output.
type Options struct {
	// Points bounds the points per counter series (DefaultPoints when 0).
	Points int
	// Annotations bounds the annotation ranges per device; the longest
	// are kept (DefaultAnnotations when 0).
	Annotations int
	// Largest is how many allocations per device become slices; 0 for none.
	Largest int
	// Filter picks the frames that name a slice and fill its stack
	// summary; nil for callsite's default rules.
	Filter *callsite.Filter
}

// Stats summarizes a written trace.
type Stats struct {
	Events int // trace events written, metadata included
	// DroppedAnnotations counts the annotation ranges left out for
	// Options.Annotations.
	DroppedAnnotations int
}

// Write writes procs as one JSON trace.
func Write(w io.Writer, procs []Process, opt Options) (Stats, error) {
	if opt.Points <= 0 {
		opt.Points = DefaultPoints
	}
	if opt.Annotations <= 0 {
		opt.Annotations = DefaultAnnotations
	}
	var st Stats
	bw := bufio.NewWriter(w)
	ew := newEventWriter(bw)
	clk := newClock(procs)
	filter := newFilter(opt)
	for i, p := range procs {
		pw := &processWriter{ew: ew, pid: i + 1, sn: p.Snapshot, clk: clk, filter: filter, opt: opt, st: &st}
		pw.write(p)
	}
	if err := ew.close(); err != nil {
		return Stats{}, fmt.Errorf("writing trace events: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return Stats{}, fmt.Errorf("writing trace events: %w", err)
	}
	st.Events = ew.n
	return st, nil
}

// processWriter writes one process's events.
type processWriter struct {
	ew      *eventWriter
	pid     int
	nextTID int
	sn      *snapshot.Snapshot
	clk     *clock
	filter  *callsite.Filter
	opt     Options
	st      *Stats
}

func (pw *processWriter) write(p Process) {
	pw.ew.emit(&event{Name: "process_name", Ph: "M", PID: pw.pid, Args: nameArgs{p.Name}})
	for _, t := range p.Timelines {
		pairs, unpaired := pairAnnotations(p.Snapshot.Annotations, t.Device)
		pw.counters(t)
		pw.instants(t, unpaired)
		pw.annotations(t, pairs)
		pw.blocks(t)
	}
}

// thread names a new thread of the process and returns its tid.
func (pw *processWriter) thread(name string) int {
	pw.nextTID++
	pw.ew.emit(&event{Name: "thread_name", Ph: "M", PID: pw.pid, TID: pw.nextTID, Args: nameArgs{name}})
	return pw.nextTID
}

// device is the track-name prefix of t's device, as torch prints it.
func device(t *replay.Timeline) string { return fmt.Sprintf("cuda:%d", t.Device) }
