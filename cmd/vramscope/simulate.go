package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/allocsim"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
)

// simulateFlags are simulate's options.
type simulateFlags struct {
	set             []string
	limit           bytesFlag
	fraction        float64
	deviceMemory    bytesFlag
	emptyCacheAfter string
	recommend       bool
	json            bool
	failOn          []string
	filterFlags
}

func newSimulateCommand(stdout, stderr io.Writer) *cobra.Command {
	var fl simulateFlags
	cmd := &cobra.Command{
		Use:   "simulate [flags] SNAPSHOT",
		Short: "Replay a snapshot's trace through a model of the CUDA caching allocator under other settings",
		Long: `Simulate replays the allocation requests of a snapshot's trace through a
model of PyTorch's CUDA caching allocator. It first replays them under the
settings the snapshot recorded and checks the model against the trace (the
validation: the same cudaMalloc, cudaFree, map and unmap calls in the same
order), then under the settings you give, and prints both runs side by side:
reserved and allocated peaks, device allocations and frees, retries,
fragmentation at the reserved peak, and whether and where it runs out of
memory. The simulation stops at the first OOM, as the program would.

--set takes PYTORCH_CUDA_ALLOC_CONF's KEY:VALUE pairs (several combine, over
the recorded settings). --limit caps the process's memory as
torch.cuda.set_per_process_memory_fraction does (--fraction F with
--device-memory, since snapshots do not record the device's size); without
either, a cap the trace shows (an OOM or retries under a memory fraction)
stays in force. --empty-cache-after calls empty_cache() at the end of each
record_function annotation whose name matches the regexp, or at the end of
each step vramscope finds with "step". --recommend tries the usual fixes and
ranks them by OOM avoided and reserved peak.

Exit status 3 when the prediction is an OOM and --fail-on oom is given.`,
		Example: `  vramscope simulate --set expandable_segments:True testdata/scenarios/out/frag_oom/frag_oom.pickle.gz
  vramscope simulate --empty-cache-after step testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz
  vramscope simulate --recommend --json testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSimulate(stdout, stderr, args[0], fl)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&fl.set, "set", nil, "allocator setting KEY:VALUE as in PYTORCH_CUDA_ALLOC_CONF (repeatable)")
	f.Var(&fl.limit, "limit", "per-process memory cap in bytes (64GiB, 1e9, ...)")
	f.Float64Var(&fl.fraction, "fraction", 0, "per-process memory fraction; needs --device-memory")
	f.Var(&fl.deviceMemory, "device-memory", "the device's total memory, for --fraction and expandable reservations")
	f.StringVar(&fl.emptyCacheAfter, "empty-cache-after", "", `regexp of record_function names after which empty_cache() is called, or "step"`)
	f.BoolVar(&fl.recommend, "recommend", false, "try the candidate fixes and rank them")
	f.BoolVar(&fl.json, "json", false, `print JSON: {"version":1,"path","devices":[{"device","validation","recorded","predicted",...}]}`)
	f.StringSliceVar(&fl.failOn, "fail-on", nil, "exit 3 when the prediction is: oom")
	fl.register(cmd)
	return cmd
}

// simulateReport is simulate's JSON (version 1).
type simulateReport struct {
	Version int              `json:"version"`
	Path    string           `json:"path"`
	Devices []simulateDevice `json:"devices"`
}

type simulateDevice struct {
	Device          int                  `json:"device"`
	Validation      *allocsim.Validation `json:"validation"`
	RecordedConf    string               `json:"recorded_settings"`
	SimulatedConf   string               `json:"simulated_settings"`
	EmptyCacheAt    []int                `json:"empty_cache_before_events"`
	LimitBytes      uint64               `json:"limit_bytes"`
	Recorded        simRun               `json:"recorded"`
	Predicted       simRun               `json:"predicted"`
	Recommendations []simRecommendation  `json:"recommendations,omitempty"`
	// baselineOOM: the recorded settings run out of memory under the
	// simulated cap, so a candidate that does not avoids the OOM.
	baselineOOM bool
}

// simRun is one column of the side-by-side table.
type simRun struct {
	MaxReserved   uint64  `json:"max_reserved_bytes"`
	MaxAllocated  uint64  `json:"max_allocated_bytes"`
	DeviceAllocs  int     `json:"device_allocs"`
	DeviceFrees   int     `json:"device_frees"`
	Retries       int     `json:"retries"`
	Fragmentation float64 `json:"fragmentation_at_peak"`
	OOM           bool    `json:"oom"`
	OOMAt         *simOOM `json:"oom_at,omitempty"`
}

type simOOM struct {
	allocsim.OOM
	Site  string   `json:"site"`
	Stack []string `json:"stack"`
}

type simRecommendation struct {
	Name       string `json:"name"`
	Settings   string `json:"settings"`
	EmptyCache bool   `json:"empty_cache_at_step_ends"`
	simRun
	Worse bool   `json:"worse"`
	Error string `json:"error,omitempty"`
}

func runSimulate(stdout, stderr io.Writer, path string, fl simulateFlags) error {
	for _, v := range fl.failOn {
		if v != "oom" {
			return fmt.Errorf("--fail-on %q: simulate gates only on oom", v)
		}
	}
	if fl.fraction != 0 && (fl.fraction <= 0 || fl.fraction > 1 || !fl.deviceMemory.set) {
		return fmt.Errorf("--fraction %g: want a fraction in (0, 1] and --device-memory (a snapshot does not record the device's size)", fl.fraction)
	}
	var re *regexp.Regexp
	if fl.emptyCacheAfter != "" && fl.emptyCacheAfter != "step" {
		var err error
		if re, err = regexp.Compile(fl.emptyCacheAfter); err != nil {
			return fmt.Errorf("--empty-cache-after: %w", err)
		}
	}
	filter, err := fl.filter()
	if err != nil {
		return err
	}
	ins, err := expandSnapshots(stderr, []string{path})
	if err != nil {
		return err
	}
	if len(ins) != 1 {
		return fmt.Errorf("simulate takes one snapshot, %s names %d", path, len(ins))
	}
	gate := keepingGate()
	defer gate.release(gate.acquire(ins[0]))
	sn, err := load(ins[0], stderr, 0)
	if err != nil {
		return &inputError{msg: fmt.Sprintf("%s: %v", ins[0], err)}
	}
	report := simulateReport{Version: 1, Path: ins[0].String()}
	for _, d := range sn.Devices() {
		sd, err := simulateDeviceRun(sn, d, fl, re, filter)
		if err != nil {
			fmt.Fprintf(stderr, "vramscope: %s: %v\n", ins[0], err)
			continue
		}
		report.Devices = append(report.Devices, sd)
	}
	if len(report.Devices) == 0 {
		return &inputError{msg: fmt.Sprintf("%s: no device has a trace to simulate (record with torch.cuda.memory._record_memory_history before the run)", ins[0])}
	}
	if fl.json {
		err = writeJSON(stdout, report)
	} else {
		err = writeSimulateText(stdout, report)
	}
	if err != nil {
		return err
	}
	if len(fl.failOn) > 0 {
		for _, d := range report.Devices {
			if d.Predicted.OOM {
				return &gateError{reasons: []string{fmt.Sprintf("device %d: the simulation runs out of memory (--fail-on oom)", d.Device)}}
			}
		}
	}
	return nil
}

func simulateDeviceRun(sn *snapshot.Snapshot, d int, fl simulateFlags, re *regexp.Regexp, filter *callsite.Filter) (simulateDevice, error) {
	rec, err := allocsim.Record(sn, d)
	if err != nil {
		return simulateDevice{}, err
	}
	s := rec.Settings
	for _, kv := range fl.set {
		if err := s.SetPair(kv); err != nil {
			return simulateDevice{}, fmt.Errorf("--set: %w", err)
		}
	}
	cfg := allocsim.Config{Limit: rec.Limit, Capacity: rec.Capacity, DeviceMemory: uint64(fl.deviceMemory.Bytes), Initial: rec.Initial}
	switch {
	case fl.limit.set:
		cfg.Limit = uint64(fl.limit.Bytes)
	case fl.fraction > 0:
		cfg.Limit = uint64(fl.fraction * float64(fl.deviceMemory.Bytes))
	}
	var stepEnds []int // found only when asked for: step detection reads the whole trace
	if fl.emptyCacheAfter == "step" || fl.recommend {
		stepEnds = traceStepEnds(sn, d, filter)
	}
	switch {
	case fl.emptyCacheAfter == "step":
		cfg.EmptyCacheAt = stepEnds
	case re != nil:
		cfg.EmptyCacheAt = allocsim.AnnotationEnds(sn, d, re)
	}
	// The validation, the simulation and --recommend's baseline and
	// candidates are independent replays of the trace: they run at once,
	// so that on enough cores simulating costs one replay after the decode.
	var (
		wg         sync.WaitGroup
		v          *allocsim.Validation
		vres, res  *allocsim.Result
		verr, rerr error
		baseline   *allocsim.Result
		outcomes   []allocsim.Outcome
	)
	wg.Go(func() { v, vres, verr = allocsim.Validate(sn, rec) })
	if fl.recommend {
		// The candidates go over the recorded settings and the cap in
		// force, without the --set and --empty-cache-after of this run.
		base := allocsim.Config{Limit: cfg.Limit, Capacity: cfg.Capacity, DeviceMemory: cfg.DeviceMemory, Initial: cfg.Initial}
		wg.Go(func() {
			baseline, outcomes, rerr = allocsim.Recommend(sn, rec, base, stepEnds, allocsim.Candidates(len(stepEnds) > 0, cfg.Limit > 0))
		})
	}
	res, err = allocsim.Run(sn, rec, s, cfg)
	wg.Wait()
	switch {
	case verr != nil:
		return simulateDevice{}, fmt.Errorf("device %d: validation: %w", d, verr)
	case err != nil:
		return simulateDevice{}, fmt.Errorf("device %d: %w", d, err)
	case rerr != nil:
		return simulateDevice{}, fmt.Errorf("device %d: --recommend: %w", d, rerr)
	}
	sd := simulateDevice{Device: d, Validation: v, RecordedConf: rec.Settings.String(), SimulatedConf: s.String(),
		EmptyCacheAt: cfg.EmptyCacheAt, LimitBytes: cfg.Limit}
	if sd.EmptyCacheAt == nil {
		sd.EmptyCacheAt = []int{}
	}
	sd.Recorded = recordedRun(sn, rec, vres, filter)
	sd.Predicted = simRunOf(sn, res, filter)
	if fl.recommend {
		sd.baselineOOM = baseline.OOM != nil
		for _, o := range outcomes {
			r := simRecommendation{Name: o.Name, Settings: o.Settings.String(), EmptyCache: o.EmptyCacheSteps, Worse: o.Worse}
			if o.Err != nil {
				r.Error = o.Err.Error()
			} else {
				r.simRun = simRunOf(sn, o.Result, filter)
			}
			sd.Recommendations = append(sd.Recommendations, r)
		}
	}
	return sd, nil
}

// traceStepEnds are the trace indices where the steps vramscope finds end.
func traceStepEnds(sn *snapshot.Snapshot, d int, filter *callsite.Filter) []int {
	tr := sn.Traces[d]
	return diagnose.TraceSteps(sn, d, tr, filter).Ends(tr.Len())
}

// recordedRun is the recorded column: reserved bytes, device calls and the
// OOM from the trace itself, the rest from the validation replay.
func recordedRun(sn *snapshot.Snapshot, rec *allocsim.Recorded, vres *allocsim.Result, filter *callsite.Filter) simRun {
	r := simRunOf(sn, vres, filter)
	r.MaxReserved, r.DeviceAllocs, r.DeviceFrees = rec.MaxReserved, rec.DeviceAllocs, rec.DeviceFrees
	r.OOM, r.OOMAt = rec.OOM != nil, nil
	if rec.OOM != nil {
		r.OOMAt = oomOf(sn, rec.OOM, filter)
	}
	return r
}

func simRunOf(sn *snapshot.Snapshot, res *allocsim.Result, filter *callsite.Filter) simRun {
	r := simRun{MaxReserved: res.MaxReserved, MaxAllocated: res.MaxAllocated, DeviceAllocs: res.DeviceAllocs,
		DeviceFrees: res.DeviceFrees, Retries: res.Retries, Fragmentation: res.FragmentationAtPeak(), OOM: res.OOM != nil}
	if res.OOM != nil {
		r.OOMAt = oomOf(sn, res.OOM, filter)
	}
	return r
}

func oomOf(sn *snapshot.Snapshot, o *allocsim.OOM, filter *callsite.Filter) *simOOM {
	so := &simOOM{OOM: *o, Site: filter.Site(sn, o.Stack).String(), Stack: []string{}}
	for _, fr := range filter.UserFrames(sn, o.Stack, 5) {
		so.Stack = append(so.Stack, fr.String())
	}
	return so
}

func writeSimulateText(w io.Writer, r simulateReport) error {
	var b strings.Builder
	gib := func(n uint64) string { return units.Bytes(n).String() }
	for _, d := range r.Devices {
		fmt.Fprintf(&b, "%s, device %d\n", r.Path, d.Device)
		v := d.Validation
		if v.Exact {
			fmt.Fprintf(&b, "  validation: exact: the model made the recorded %d device calls, in order, and put every allocation where the trace did\n", v.Recorded)
		} else {
			fmt.Fprintf(&b, "  validation: %d of %d recorded device calls reproduced", v.Matched, v.Recorded)
			if v.FirstDivergence != "" {
				fmt.Fprintf(&b, "; first difference at %s", v.FirstDivergence)
			}
			if v.Misplaced > 0 {
				fmt.Fprintf(&b, "; %d allocations placed elsewhere, the first at event %d", v.Misplaced, v.MisplacedEvent)
			}
			b.WriteString("\n")
		}
		for _, n := range v.Notes {
			fmt.Fprintf(&b, "    note: %s\n", n)
		}
		if d.LimitBytes > 0 {
			fmt.Fprintf(&b, "  memory cap: %s\n", gib(d.LimitBytes))
		}
		if len(d.EmptyCacheAt) > 0 {
			fmt.Fprintf(&b, "  empty_cache() added before %s\n", units.Plural(len(d.EmptyCacheAt), "event"))
		}
		fmt.Fprintf(&b, "  %-24s %-22s %s\n", "", "recorded", "simulated")
		fmt.Fprintf(&b, "  %-24s %-22s %s\n", "settings", d.RecordedConf, d.SimulatedConf)
		row := func(name, a, c string) { fmt.Fprintf(&b, "  %-24s %-22s %s\n", name, a, c) }
		rc, pc := d.Recorded, d.Predicted
		row("reserved peak", gib(rc.MaxReserved), gib(pc.MaxReserved))
		row("allocated peak", gib(rc.MaxAllocated), gib(pc.MaxAllocated))
		row("device allocs / frees", fmt.Sprintf("%d / %d", rc.DeviceAllocs, rc.DeviceFrees), fmt.Sprintf("%d / %d", pc.DeviceAllocs, pc.DeviceFrees))
		row("retries", fmt.Sprint(rc.Retries), fmt.Sprint(pc.Retries))
		row("fragmentation at peak", fmt.Sprintf("%.1f%%", 100*rc.Fragmentation), fmt.Sprintf("%.1f%%", 100*pc.Fragmentation))
		oom := func(r simRun) string {
			if !r.OOM {
				return "none"
			}
			return fmt.Sprintf("at event %d", r.OOMAt.Event)
		}
		row("out of memory", oom(rc), oom(pc))
		for _, o := range []struct {
			who string
			r   simRun
		}{{"recorded", rc}, {"simulated", pc}} {
			if o.r.OOMAt == nil {
				continue
			}
			x := o.r.OOMAt
			fmt.Fprintf(&b, "  %s OOM: %s requested (%s rounded, cudaMalloc %s) with %s reserved", o.who, gib(x.Requested), gib(x.Rounded), gib(x.AllocSize), gib(x.Reserved))
			if x.Limit > 0 {
				fmt.Fprintf(&b, " of a %s cap", gib(x.Limit))
			}
			fmt.Fprintf(&b, " (%s)\n    at %s\n", x.Reason, x.Site)
			for _, fr := range x.Stack {
				if fr != x.Site {
					fmt.Fprintf(&b, "      from %s\n", fr)
				}
			}
		}
		if len(d.Recommendations) > 0 {
			fmt.Fprintf(&b, "  candidate fixes, best first (baseline: the recorded settings):\n")
			for _, c := range d.Recommendations {
				if c.Error != "" {
					fmt.Fprintf(&b, "    %-56s error: %s\n", c.Name, c.Error)
					continue
				}
				verdict := ""
				switch {
				case c.OOM:
					verdict = fmt.Sprintf("runs out of memory at event %d", c.OOMAt.Event)
				case c.Worse:
					verdict = "worse"
				case d.baselineOOM:
					verdict = "avoids the OOM"
				}
				fmt.Fprintf(&b, "    %-56s reserved peak %-10s %s\n", c.Name, gib(c.MaxReserved), verdict)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
