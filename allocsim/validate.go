package allocsim

import (
	"fmt"

	"github.com/vramscope/vramscope/allocator"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Recorded is what the trace itself says about the run: its device calls,
// reserved bytes and OOM, and what the replay can take from it.
type Recorded struct {
	Device       int
	Settings     allocator.Settings
	MaxReserved  uint64
	DeviceAllocs int
	DeviceFrees  int
	EmptyCaches  int
	Streams      int
	OOM          *OOM
	// StartReserved is what was reserved before the first kept event (the
	// dump's segments minus what the trace reserved): 0 when recording
	// started before any allocation and the ring buffer kept everything.
	StartReserved int64
	// Limit or Capacity, inferred from a recorded OOM (the trace does not
	// record set_per_process_memory_fraction), and how.
	Limit, Capacity uint64
	LimitNote       string
	Reserved        []Point
	// Initial is the state at the first event when the trace starts late
	// (StartReserved != 0), rebuilt by the replay; put it in Config.
	Initial    *replay.State
	InitialErr error
	trace      snapshot.Trace
	scan       recorded
	private    privatePools
}

// Record reads device's trace of sn.
func Record(sn *snapshot.Snapshot, device int) (*Recorded, error) {
	tr, err := deviceTrace(sn, device)
	if err != nil {
		return nil, err
	}
	s, err := allocator.FromSnapshot(sn.Settings)
	if err != nil {
		return nil, err
	}
	var final, net int64
	for i := range sn.Segments {
		if sn.Segments[i].Device == device {
			final += int64(sn.Segments[i].TotalSize)
		}
	}
	for _, e := range tr.Others() {
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			net += int64(e.Size)
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			net -= int64(e.Size)
		}
	}
	start := max(final-net, 0)
	in := scan(sn, device, tr, &s, start)
	r := &Recorded{Device: device, Settings: s, trace: tr, scan: in, Streams: len(in.streams),
		EmptyCaches: len(in.emptyCache), StartReserved: final - net, private: findPrivatePools(sn, device)}
	cur := start
	r.MaxReserved = uint64(cur)
	for _, d := range in.device {
		if d.Action == snapshot.ActionSegmentAlloc || d.Action == snapshot.ActionSegmentMap {
			cur += int64(d.Size)
			r.DeviceAllocs++
		} else {
			cur -= int64(d.Size)
			r.DeviceFrees++
		}
		r.MaxReserved = max(r.MaxReserved, uint64(max(cur, 0)))
		r.Reserved = append(r.Reserved, Point{Event: d.At, Bytes: uint64(max(cur, 0))})
	}
	r.findOOM(sn)
	if r.StartReserved != 0 {
		r.Initial, r.InitialErr = initialState(sn, device)
	}
	return r, nil
}

// findOOM records the trace's first OOM and the cap it and the retries
// before it imply: device memory when the device had less free than the
// failed cudaMalloc asked for, otherwise a memory fraction, taken as the
// highest cap consistent with every device allocation that fitted and
// every one that failed.
func (r *Recorded) findOOM(sn *snapshot.Snapshot) {
	k := 0
	cur := max(r.StartReserved, 0)
	for i, e := range r.trace.Others() {
		for ; k < len(r.scan.device) && r.scan.device[k].At < i; k++ {
			if d := r.scan.device[k]; d.Action == snapshot.ActionSegmentAlloc || d.Action == snapshot.ActionSegmentMap {
				cur += int64(d.Size)
			} else {
				cur -= int64(d.Size)
			}
		}
		if e.Action != snapshot.ActionOOM {
			continue
		}
		rounded := r.Settings.Round(e.Size)
		o := &OOM{Event: i, Requested: e.Size, Rounded: rounded, AllocSize: r.Settings.SegmentSize(rounded),
			Stream: e.Stream, Stack: e.Stack, Reserved: uint64(cur)}
		r.OOM = o
		if e.Addr < o.AllocSize {
			r.Capacity = o.Reserved + e.Addr
			o.Reason = "device memory"
			r.LimitNote = fmt.Sprintf("the device had %d bytes free at %d reserved: capacity taken as %d", e.Addr, o.Reserved, r.Capacity)
			return
		}
		o.Reason = "memory fraction"
		break
	}
	if r.scan.upper == 0 {
		return
	}
	if r.scan.upper < r.scan.lower {
		r.LimitNote = fmt.Sprintf("the device allocations that failed (below %d bytes) and those that fitted (%d bytes) imply no single cap: replayed without one", r.scan.upper+1, r.scan.lower)
		return
	}
	r.Limit = r.scan.upper
	if r.OOM != nil {
		r.OOM.Limit = r.Limit
	}
	r.LimitNote = fmt.Sprintf("a cap refused device allocations (set_per_process_memory_fraction is not recorded): it lies in [%d, %d] bytes; replayed with %d", r.scan.lower, r.scan.upper, r.Limit)
}

// Validation compares a replay under the recorded settings with the trace.
type Validation struct {
	// Exact: the same device calls (action and size, in order), every
	// allocation at the recorded address, and the same OOM as the trace.
	Exact     bool `json:"exact"`
	Recorded  int  `json:"recorded_device_events"`
	Predicted int  `json:"predicted_device_events"`
	// Matched is how many device events agree from the start.
	Matched int `json:"matched_device_events"`
	// FirstDivergence describes the first device event that differs.
	FirstDivergence string `json:"first_divergence,omitempty"`
	DivergenceEvent int    `json:"divergence_event"` // its trace index; -1 when none
	RecordedPeak    uint64 `json:"recorded_max_reserved_bytes"`
	PredictedPeak   uint64 `json:"predicted_max_reserved_bytes"`
	OOMAgrees       bool   `json:"oom_agrees"`
	// Misplaced counts allocations the model placed at another address
	// than the trace records (the first at MisplacedEvent): the model chose
	// another free block, or the addresses it was given differ.
	Misplaced      int      `json:"misplaced_allocations"`
	MisplacedEvent int      `json:"first_misplaced_event"`
	Notes          []string `json:"notes"` // why the model may differ here
}

// Validate replays the trace under the recorded settings (and the cap a
// recorded OOM implies) with the recorded addresses and compares the
// device calls event by event.
func Validate(sn *snapshot.Snapshot, rec *Recorded) (*Validation, *Result, error) {
	cfg := Config{Limit: rec.Limit, Capacity: rec.Capacity, Initial: rec.Initial, Bound: true}
	res, err := Run(sn, rec, rec.Settings, cfg)
	if err != nil {
		return nil, nil, err
	}
	v := &Validation{Recorded: len(rec.scan.device), Predicted: len(res.events), DivergenceEvent: -1,
		RecordedPeak: rec.MaxReserved, PredictedPeak: res.MaxReserved, Notes: []string{}}
	for v.Matched < min(v.Recorded, v.Predicted) {
		r, p := rec.scan.device[v.Matched], res.events[v.Matched]
		if r.Action != p.Action || r.Size != p.Size {
			break
		}
		v.Matched++
	}
	if v.Matched < max(v.Recorded, v.Predicted) {
		var r, p string = "nothing", "nothing"
		at := -1
		if v.Matched < v.Recorded {
			d := rec.scan.device[v.Matched]
			r, at = fmt.Sprintf("%s of %d bytes", d.Action, d.Size), d.At
		}
		if v.Matched < v.Predicted {
			d := res.events[v.Matched]
			p = fmt.Sprintf("%s of %d bytes", d.Action, d.Size)
			if at < 0 || d.At < at {
				at = d.At
			}
		}
		v.DivergenceEvent = at
		v.FirstDivergence = fmt.Sprintf("device event %d (trace event %d): recorded %s, model %s", v.Matched, at, r, p)
	}
	v.OOMAgrees = (rec.OOM == nil) == (res.OOM == nil) && (rec.OOM == nil || rec.OOM.Event == res.OOM.Event)
	v.Misplaced, v.MisplacedEvent = res.misplaced, -1
	if res.misplaced > 0 {
		v.MisplacedEvent = res.firstMisplaced
	}
	v.Exact = v.Matched == v.Recorded && v.Recorded == v.Predicted && v.OOMAgrees && v.Misplaced == 0
	v.Notes = notes(sn, rec)
	return v, res, nil
}

// notes says what keeps a replay of this trace from being exact.
func notes(sn *snapshot.Snapshot, rec *Recorded) []string {
	var n []string
	if sn.Settings == nil {
		n = append(n, "the snapshot records no allocator settings (torch before 2.3): the validation replays the defaults, so a run that set PYTORCH_CUDA_ALLOC_CONF diverges from it; the what-if applies --set over the defaults, so give the run's own settings there too")
	}
	if !rec.scan.hasStacks {
		n = append(n, "the trace records no stacks (_record_memory_history(context=None)): the sizes, peaks and OOMs are predicted as with stacks, but an OOM's line cannot be named, and empty_cache() calls are told from the allocator's own releases only by where they fall")
	}
	switch {
	case rec.StartReserved != 0 && rec.Initial != nil:
		n = append(n, fmt.Sprintf("the trace starts after %d bytes were already reserved (recording started late or the ring buffer dropped the start): the model starts from the state rebuilt from the dump's segments and the trace, where the block sizes of allocations made before the trace are inferred and the extent of expandable reservations is unknown", rec.StartReserved))
	case rec.StartReserved != 0:
		n = append(n, fmt.Sprintf("the trace starts after %d bytes were already reserved and the state before it could not be rebuilt (%v): the model starts from an empty allocator, so its reserved bytes are low by up to that", rec.StartReserved, rec.InitialErr))
	}
	if rec.Streams > 1 {
		n = append(n, fmt.Sprintf("%d streams: frees that waited on record_stream events complete where the trace recorded them, which a what-if keeps although the GPU's timing could differ", rec.Streams))
	}
	if private := rec.private.bytes(); private > 0 {
		n = append(n, fmt.Sprintf("%d bytes in CUDA graph or MemPool private pools at the dump: private pools are outside the model, their segments and blocks replayed as fixed bytes where the trace recorded them (a private segment released before the dump is not known as one)", private))
	}
	if rec.Settings.GCThreshold > 0 && rec.Limit == 0 {
		n = append(n, "garbage_collection_threshold acts only under set_per_process_memory_fraction, which the snapshot does not record: replayed as inactive")
	}
	if rec.LimitNote != "" {
		n = append(n, rec.LimitNote)
	}
	return n
}
