package analyze

import (
	"cmp"
	"github.com/vramscope/vramscope/pools"
	"slices"

	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/diagnose"
)

// ReportVersion is the version of the JSON contract Report follows.
const ReportVersion = 1

// Verdict is the one-word answer for a process or a whole report.
type Verdict string

const (
	Healthy       Verdict = "healthy"
	Leak          Verdict = "leak"
	Fragmentation Verdict = "fragmentation"
	OOM           Verdict = "oom"
	// NoVerdict is a report's verdict when no input could be read: with
	// nothing read there is nothing to judge, healthy included.
	NoVerdict Verdict = "none"
)

// verdictRank orders verdicts by how bad they are: an OOM is what the
// user sees, a leak is the usual cause of a later one, fragmentation
// wastes memory without growing the live set.
var verdictRank = map[Verdict]int{Healthy: 0, Fragmentation: 1, Leak: 2, OOM: 3}

// worse returns the worse of two verdicts.
func worse(a, b Verdict) Verdict {
	if verdictRank[b] > verdictRank[a] {
		return b
	}
	return a
}

// Report is the analysis of every input, grouped by process.
type Report struct {
	Version   int       `json:"version"`
	Verdict   Verdict   `json:"verdict"`
	Processes []Process `json:"processes"`
}

// Process is one OS process's inputs, verdict, figures and findings.
type Process struct {
	// ID is "rank0/pid746", "pid746", "actor/rank0" or, for inputs whose
	// names carry no identity, the file name without extensions.
	ID   string `json:"id"`
	Rank *int   `json:"rank"`
	PID  *int   `json:"pid"`
	Tag  string `json:"tag"`
	// Inputs are the paths read for this process, snapshots in analysis
	// order, then memory logs and text files.
	Inputs   []string           `json:"inputs"`
	Verdict  Verdict            `json:"verdict"`
	Stats    Stats              `json:"stats"`
	Findings []diagnose.Finding `json:"findings"`
	// Snapshots are the per-snapshot totals, in analysis order.
	Snapshots []Point `json:"snapshots"`
	// Breakdown is what each device's memory was made of in the last
	// snapshot with a trace: category totals at its peak, at its end and
	// at each step's peak (see package breakdown); empty without a trace.
	Breakdown []breakdown.Report `json:"breakdown"`
	// Notes say what limited the analysis (a single snapshot, memory logs
	// that cannot name code, ...).
	Notes []string `json:"notes"`
	// PoolCharts are the series of the process's pool findings, for the
	// report page to draw (its payload's "pools"); analyze's JSON leaves
	// them out.
	PoolCharts []pools.Chart `json:"-"`
}

// Stats are the last snapshot's totals (the last memory-log sample's when
// the process has no snapshot) and the highest peaks its traces saw.
type Stats struct {
	// AllocatedBytes and ReservedBytes are summed over the devices: the
	// dump is one moment, so the sum is what the process held then.
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	// Peaks are the highest that any one device's trace reached (each
	// device runs out on its own, and peaks of several devices fall at
	// different times, so their sum never happened); nil when no input
	// had a trace.
	PeakAllocatedBytes *int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  *int64 `json:"peak_reserved_bytes"`
	// Devices are the same figures per device, ascending; empty when the
	// process has no snapshot.
	Devices []DeviceStats `json:"devices"`
}

// DeviceStats are one device's figures: its totals in the last snapshot
// and the highest peaks of its traces across the process's snapshots.
type DeviceStats struct {
	DeviceTotals
	// Peaks are nil when no snapshot had a trace on this device.
	PeakAllocatedBytes *int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  *int64 `json:"peak_reserved_bytes"`
}

// Point is one snapshot's totals over its devices.
type Point struct {
	Input          string `json:"input"`
	Step           *int   `json:"step"`
	AllocatedBytes int64  `json:"allocated_bytes"`
	ReservedBytes  int64  `json:"reserved_bytes"`
	// Devices are the totals per device, ascending.
	Devices []DeviceTotals `json:"devices"`
}

// DeviceTotals are one device's allocator totals at a dump.
type DeviceTotals struct {
	Device         int   `json:"device"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
}

// severityRank orders findings for display.
var severityRank = map[diagnose.Severity]int{diagnose.High: 0, diagnose.Medium: 1, diagnose.Low: 2}

// sortFindings ranks findings by severity, then bytes, so the line to fix
// comes first; a 3 GiB peak does not push a 40 MiB-per-step leak down.
func sortFindings(fs []diagnose.Finding) { slices.SortStableFunc(fs, compareFindings) }

func compareFindings(a, b diagnose.Finding) int {
	if c := cmp.Compare(severityRank[a.Severity], severityRank[b.Severity]); c != 0 {
		return c
	}
	return cmp.Compare(b.Bytes, a.Bytes)
}

// verdictOf is the worst verdict among findings of high or medium
// severity. Low findings are reported but decide nothing, and a peak,
// however large, is not a verdict: memory that goes back down is not a bug.
func verdictOf(fs []diagnose.Finding) Verdict {
	v := Healthy
	for _, f := range fs {
		if f.Severity == diagnose.Low {
			continue
		}
		switch f.Kind {
		case diagnose.KindOOM:
			v = worse(v, OOM)
		case diagnose.KindLeak:
			v = worse(v, Leak)
		case diagnose.KindFragmentation:
			v = worse(v, Fragmentation)
		}
	}
	return v
}
