package report

import (
	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/pools"
)

// PayloadVersion is the version of the JSON contract Payload follows.
const PayloadVersion = 1

// Payload is everything a graphical report shows.
type Payload struct {
	Version   int             `json:"version"`
	Verdict   analyze.Verdict `json:"verdict"`
	Processes []Process       `json:"processes"`
}

// Process is one process of analyze's Report with the views of its
// snapshots.
type Process struct {
	ID       string             `json:"id"`
	Verdict  analyze.Verdict    `json:"verdict"`
	Stats    analyze.Stats      `json:"stats"`
	Inputs   []string           `json:"inputs"`
	Findings []diagnose.Finding `json:"findings"`
	Notes    []string           `json:"notes"`
	// Totals are the per-snapshot totals, in analysis order.
	Totals []analyze.Point `json:"totals"`
	// Snapshots are the views of the process's snapshots, in analysis
	// order.
	Snapshots []SnapshotView `json:"snapshots"`
	// Sites are the callsites holding the most bytes at the end of any of
	// the process's snapshots, with their bytes at each snapshot's end
	// (Totals order), leaking callsites first.
	Sites []SiteSeries `json:"sites"`
	// Leaked is the flame graph of the blocks that the leak findings'
	// callsites hold at the end of the last snapshot; nil without leaks.
	Leaked *Flame `json:"leaked"`
	// Focus is where the page opens; nil without snapshots.
	Focus *Focus `json:"focus"`
	// Pools chart the pools the process's serving-log findings are about,
	// one per leaking rank; absent when there are none.
	Pools []pools.Chart `json:"pools,omitempty"`
}

// SnapshotView is one snapshot reduced to what the report draws.
type SnapshotView struct {
	// ID is unique within a payload: the served UI asks for states, flame
	// graphs and diffs by it.
	ID       int          `json:"id"`
	Input    string       `json:"input"`
	Step     *int         `json:"step"`
	Devices  []DeviceView `json:"devices"`
	EndSites []SiteBytes  `json:"end_sites"`
}

// DeviceView is one device of a snapshot.
type DeviceView struct {
	Device int `json:"device"`
	// Events is the trace's length; 0 when the snapshot has no trace, and
	// then Series is empty and only the end is shown.
	Events  int      `json:"events"`
	Series  Series   `json:"series"`
	Markers []Marker `json:"markers"`
	// States are the allocator states at chosen moments: the allocated
	// peak, the end and each OOM.
	States []State `json:"states"`
	// Flames are the live bytes by stack at the end and at the peak.
	Flames []Flame `json:"flames"`
	// Composition is the memory by category and by module over the
	// trace; nil without one.
	Composition *Composition `json:"composition"`
	// Caveats say what limited the replay.
	Caveats []string `json:"caveats"`
	// WhatIf is the reserved bytes the allocator model predicts under the
	// setting that the device's OOM or fragmentation findings advise; nil
	// without such advice.
	WhatIf *WhatIf `json:"whatif"`
}

// Series is a device's usage over its trace, downsampled to buckets of
// consecutive events with each bucket's minimum and maximum, so that every
// spike survives. The arrays are columns of equal length, one per bucket.
type Series struct {
	// XUnit is "us" when X is microseconds since StartUS (the trace has
	// times), or "event" when X is the event index.
	XUnit   string `json:"x_unit"`
	StartUS int64  `json:"start_us"`
	// X is each bucket's first event's position; First its event index.
	X            []int64 `json:"x"`
	First        []int   `json:"first"`
	AllocatedMin []int64 `json:"allocated_min"`
	AllocatedMax []int64 `json:"allocated_max"`
	ReservedMin  []int64 `json:"reserved_min"`
	ReservedMax  []int64 `json:"reserved_max"`
}

// Marker is a moment worth a vertical line on the timeline.
type Marker struct {
	Kind  string `json:"kind"` // "step", "snapshot", "oom" or "peak"
	Event int    `json:"event"`
	X     int64  `json:"x"` // in Series.XUnit
	Label string `json:"label"`
}

// State is the allocator's segments and blocks at one moment.
type State struct {
	// Label says which moment: "peak", "end", "oom 1", "event 1234".
	Label string `json:"label"`
	// Event is the event index; -1 before the first event or for a
	// snapshot without a trace.
	Event          int       `json:"event"`
	AllocatedBytes int64     `json:"allocated_bytes"`
	ReservedBytes  int64     `json:"reserved_bytes"`
	Segments       []Segment `json:"segments"`
	// Sites are the callsites that Block.Site indexes.
	Sites []Site `json:"sites"`
	// Truncated counts the smallest segments left out to bound the size.
	Truncated int `json:"truncated"`
}

// Segment is one row of the allocator state.
type Segment struct {
	Address uint64  `json:"address"`
	Size    uint64  `json:"size"`
	Pool    string  `json:"pool"` // "small" or "large", with a private pool's id
	Stream  int64   `json:"stream"`
	Blocks  []Block `json:"blocks"`
}

// Block is one block of a segment.
type Block struct {
	Offset    uint64 `json:"offset"`
	Size      uint64 `json:"size"`
	Requested uint64 `json:"requested"`
	// State is "allocated", "pending_free" or "free".
	State string `json:"state"`
	// Site indexes State.Sites; -1 for free blocks.
	Site int `json:"site"`
}

// Site is a callsite: the user line blamed and a short stack.
type Site struct {
	Label string   `json:"label"`
	Stack []string `json:"stack"`
}

// Flame is a flame graph of live bytes, in d3-flame-graph's shape.
type Flame struct {
	Label string    `json:"label"`
	Root  FlameNode `json:"root"`
}

// FlameNode is one frame: Value is the bytes live under it.
type FlameNode struct {
	Name     string      `json:"name"`
	Value    int64       `json:"value"`
	Children []FlameNode `json:"children"`
}

// SiteBytes is one callsite's live bytes at one moment.
type SiteBytes struct {
	Site  string `json:"site"`
	Bytes int64  `json:"bytes"`
}

// SiteSeries is one callsite's live bytes at each snapshot's end.
type SiteSeries struct {
	Site  string  `json:"site"`
	Leak  bool    `json:"leak"`
	Bytes []int64 `json:"bytes"`
}
