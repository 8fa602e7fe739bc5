package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/vramscope/vramscope/breakdown"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/export/perfetto"
	"github.com/vramscope/vramscope/export/pprofout"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// exportFlags are the export command's options.
type exportFlags struct {
	pprof, perfetto string
	at              string
	device          int
	largest, points int
	annotations     int
	filterFlags
}

// allDevices is --device's default.
const allDevices = -1

func newExportCommand(stderr io.Writer) *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export FILE... [--pprof OUT.pb.gz [--at end|peak|leak]] [--perfetto OUT.json] [--device N]",
		Short: "Write live memory by stack as a pprof profile, or memory over time as a Perfetto trace",
		Long: `Export writes snapshots in formats that existing viewers open.

--pprof writes the blocks live at one moment as a gzipped pprof heap profile:
inuse_space and inuse_objects by stack, with labels device, stream, state
(allocated or pending_free), pool and user_metadata, and numeric labels bytes
and requested. --at end takes the snapshot's own active blocks (the total is
what torch.cuda.memory_stats() reported as active bytes at the dump); --at
peak takes each device's replayed allocated peak; --at leak takes the blocks
still allocated at the end whose callsite grows every step (as vramscope
steps finds them, with --focus and --ignore), so the total is what the leaks
hold. Pending frees are included
because they still hold memory; -tagfocus state=allocated drops them. It needs
exactly one FILE: to compare two snapshots, export each and use -diff_base.

  go tool pprof -top OUT.pb.gz
  go tool pprof -http=: -diff_base step2.pb.gz step4.pb.gz

--perfetto writes Chrome trace-event JSON for ui.perfetto.dev: per device,
counter tracks of allocated, active and reserved bytes, instants for OOMs,
snapshot() calls and unpaired annotations, the --annotations longest
record_function ranges, and the --largest largest allocations as slices with
their size and stack. Several
FILEs become separate processes on one clock (ranks of a job, or steps).

--device N keeps only device N (cuda:N) of each file.`,
		Example: `  vramscope export step4.pickle --pprof leak.pb.gz --at leak && go tool pprof -top leak.pb.gz
  vramscope export "runs/step*/rank*.pickle" --perfetto run.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return export(cmd.Context(), stderr, args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.pprof, "pprof", "", "write a gzipped pprof profile of live bytes by stack to `OUT.pb.gz`")
	fl.StringVar(&f.at, "at", "end", "pprof blocks: end (live at the dump), peak (at each device's allocated peak) or leak (the leaking callsites' blocks at the end)")
	fl.StringVar(&f.perfetto, "perfetto", "", "write a Chrome/Perfetto JSON trace to `OUT.json`")
	fl.IntVar(&f.device, "device", allDevices, "export only device `N` (default: all)")
	fl.IntVar(&f.largest, "largest", 200, "perfetto: slices for the `N` largest allocations per device")
	fl.IntVar(&f.points, "points", perfetto.DefaultPoints, "perfetto: at most `N` points per counter series")
	fl.IntVar(&f.annotations, "annotations", perfetto.DefaultAnnotations, "perfetto: keep the `N` longest annotation ranges per device")
	f.register(cmd)
	return cmd
}

// loaded is one input, decoded and replayed.
type loaded struct {
	in        inputs.Input
	sn        *snapshot.Snapshot
	timelines []*replay.Timeline
}

// export checks the flags, loads every input (stopping at the first that
// cannot be read, so no partial output is written) and writes each output.
func export(ctx context.Context, stderr io.Writer, args []string, f exportFlags) error {
	if f.pprof == "" && f.perfetto == "" {
		return errors.New("export: nothing to write: give --pprof, --perfetto or both")
	}
	if err := checkAt(f.at); err != nil {
		return err
	}
	filter, err := f.filter()
	if err != nil {
		return err
	}
	ins, err := expandSnapshots(stderr, args)
	if err != nil {
		return err
	}
	if f.pprof != "" && len(ins) != 1 {
		return fmt.Errorf("export --pprof: needs exactly one snapshot, got %d; export each and compare with go tool pprof -diff_base", len(ins))
	}

	var all []loaded
	gate := keepingGate()
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			return err
		}
		held := gate.acquire(in)
		defer gate.release(held)
		l, err := loadReplayed(in, stderr, f.device)
		if err != nil {
			return &inputError{msg: fmt.Sprintf("%s: %v", in, err)}
		}
		all = append(all, l)
	}
	if f.device != allDevices && !slices.ContainsFunc(all, func(l loaded) bool { return len(l.timelines) > 0 }) {
		return &inputError{msg: fmt.Sprintf("no input has device %d", f.device)}
	}

	if f.pprof != "" {
		if err := writePprof(stderr, f.pprof, all[0], f.at, filter); err != nil {
			return err
		}
	}
	if f.perfetto != "" {
		if err := writePerfetto(stderr, f.perfetto, all, f); err != nil {
			return err
		}
	}
	return nil
}

// loadReplayed loads and replays one input, keeping only device dev
// unless it is allDevices.
func loadReplayed(in inputs.Input, stderr io.Writer, dev int) (loaded, error) {
	sn, tls, err := loadDevices(in, stderr)
	if err != nil {
		return loaded{}, err
	}
	if dev != allDevices {
		tls = slices.DeleteFunc(tls, func(t *replay.Timeline) bool { return t.Device != dev })
		if len(tls) == 0 {
			fmt.Fprintf(stderr, "vramscope: %s: no device %d (devices: %v)\n", in, dev, sn.Devices())
		}
	}
	return loaded{in: in, sn: sn, timelines: tls}, nil
}

func writePprof(stderr io.Writer, path string, l loaded, at string, filter *callsite.Filter) error {
	blocks, timeUS, err := pprofBlocks(l, at, filter)
	if err != nil {
		return err
	}
	labelBlocks(l, at, filter, blocks)
	meta := pprofout.Meta{TimeUS: timeUS, Comments: []string{"vramscope export: " + l.in.String() + " at " + at}}
	var st pprofout.Stats
	err = writeFile(path, func(w io.Writer) (err error) {
		st, err = pprofout.Write(w, l.sn, blocks, meta)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "vramscope: wrote %s: %s in %s (%s) at %s\n",
		path, units.Bytes(st.Bytes), units.Plural(st.Blocks, "block"), units.Plural(st.Samples, "sample"), at)
	return nil
}

func writePerfetto(stderr io.Writer, path string, all []loaded, f exportFlags) error {
	procs := make([]perfetto.Process, len(all))
	for i, l := range all {
		procs[i] = perfetto.Process{Name: processName(l.in), Snapshot: l.sn, Timelines: l.timelines}
	}
	var st perfetto.Stats
	err := writeFile(path, func(w io.Writer) (err error) {
		st, err = perfetto.Write(w, procs, perfetto.Options{Points: f.points, Largest: f.largest, Annotations: f.annotations})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "vramscope: wrote %s: %s for %s\n", path, units.Plural(st.Events, "trace event"), units.Plural(len(procs), "snapshot"))
	if st.DroppedAnnotations > 0 {
		fmt.Fprintf(stderr, "vramscope: left out the %s (--annotations %d per device)\n",
			units.Plural(st.DroppedAnnotations, "shortest annotation range"), f.annotations)
	}
	return nil
}

// processName labels a trace process: the path, and the rank and pid its
// name carries, which are what a person looks for among many.
func processName(in inputs.Input) string {
	var ids []string
	if in.HasRank {
		ids = append(ids, fmt.Sprintf("rank %d", in.Rank))
	}
	if in.HasPID {
		ids = append(ids, fmt.Sprintf("pid %d", in.PID))
	}
	if len(ids) == 0 {
		return in.String()
	}
	return fmt.Sprintf("%s (%s)", in, strings.Join(ids, ", "))
}

// labelBlocks sets each block's breakdown category and module: the
// labels of the blocks active at the export's moment (each device's peak,
// or the end of its trace for end and leak).
func labelBlocks(l loaded, at string, f *callsite.Filter, blocks []pprofout.Block) {
	byDevice := map[int]map[uint64]breakdown.Label{}
	for _, tl := range l.timelines {
		i := tl.Len() - 1
		if at == "peak" {
			i = tl.Peak(replay.Allocated).Index
		}
		byDevice[tl.Device] = breakdown.Classify(l.sn, tl, breakdown.Options{Filter: f}).ActiveAt(i)
	}
	for k := range blocks {
		b := &blocks[k]
		if lab, ok := byDevice[b.Device][b.Addr]; ok {
			b.Category, b.Module = string(lab.Category), lab.Module
		}
	}
}
