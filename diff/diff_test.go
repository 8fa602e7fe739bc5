package diff

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/breakdown"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
)

const scenarios = "../testdata/scenarios/out/"

// side loads a scenario snapshot as a diff side, named as inputs names it.
func side(t *testing.T, path string) *Side {
	t.Helper()
	full := filepath.Join(scenarios, path)
	sn := testutil.Snapshot(t, full)
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatal(err)
	}
	s := &Side{Path: full, Snapshot: sn, Timelines: tls, TorchVersion: TorchVersion(full)}
	if id := inputs.ParseIdentity(full); id.HasStep {
		s.FileStep = &id.Step
	}
	return s
}

// jsonNumber reads a number from a scenario's JSON file (expected.json or
// a snapshot's sidecar), keys naming object keys or list indices: torch's
// own figures.
func jsonNumber(t *testing.T, path string, keys ...string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(scenarios, path))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				t.Fatalf("%s: no %v", path, keys)
			}
			v = x[i]
		default:
			t.Fatalf("%s: no %v", path, keys)
		}
	}
	n, ok := v.(float64)
	if !ok {
		t.Fatalf("%s: %v is not a number", path, keys)
	}
	return int64(n)
}

// compare compares two scenario snapshots on their one device.
func compare(t *testing.T, a, b string, opts Options) Device {
	t.Helper()
	p, err := Compare("", side(t, a), side(t, b), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Devices) != 1 {
		t.Fatalf("%d devices, want 1", len(p.Devices))
	}
	d := p.Devices[0]
	if opts.By == nil {
		checkSums(t, d)
	}
	return d
}

// checkSums asserts that each table accounts for every allocated byte at
// the moment on both sides: its rows, its rest and its unchanged rows.
func checkSums(t *testing.T, d Device) {
	t.Helper()
	for name, tb := range map[string]*Table{"callsite": d.Callsites, "category": d.Categories, "module": d.Modules} {
		if tb == nil {
			t.Errorf("no %s table", name)
			continue
		}
		sa, sb := tb.Rest.ABytes+tb.UnchangedBytes, tb.Rest.BBytes+tb.UnchangedBytes
		for _, r := range tb.Rows {
			sa += r.ABytes
			sb += r.BBytes
			if r.DeltaBytes != r.BBytes-r.ABytes || r.Change != changeOf(r.ABytes, r.BBytes) {
				t.Errorf("%s row %s: delta %d, change %s for %d -> %d", name, r.Name, r.DeltaBytes, r.Change, r.ABytes, r.BBytes)
			}
		}
		if sa != d.A.AllocatedBytes || sb != d.B.AllocatedBytes {
			t.Errorf("%s rows sum to %d and %d, allocated at the moment %d and %d", name, sa, sb, d.A.AllocatedBytes, d.B.AllocatedBytes)
		}
	}
}

// row finds the row whose name starts with prefix.
func row(t *testing.T, tb *Table, prefix string) Row {
	t.Helper()
	for _, r := range tb.Rows {
		if strings.HasPrefix(r.Name, prefix) {
			return r
		}
	}
	t.Fatalf("no row %q in %+v", prefix, tb.Rows)
	return Row{}
}

// The fp32 upcast of peak_upcast is what its fix, peak_chunked, does not
// hold at its peak: the peaks are torch's max_memory_allocated, and the
// upcast line holds the N x V fp32 copy.
func TestPeakUpcastAgainstChunked(t *testing.T) {
	d := compare(t, "peak_chunked/peak_chunked.pickle.gz", "peak_upcast/peak_upcast.pickle.gz", Options{})
	wantA := jsonNumber(t, "peak_chunked/expected.json", "max_memory_allocated")
	wantB := jsonNumber(t, "peak_upcast/expected.json", "max_memory_allocated")
	if d.A.AllocatedBytes != wantA || d.B.AllocatedBytes != wantB || *d.A.PeakAllocatedBytes != wantA || *d.B.PeakAllocatedBytes != wantB {
		t.Errorf("allocated at the peaks %d -> %d (peaks %d -> %d), torch's max_memory_allocated %d -> %d",
			d.A.AllocatedBytes, d.B.AllocatedBytes, *d.A.PeakAllocatedBytes, *d.B.PeakAllocatedBytes, wantA, wantB)
	}
	if d.Delta.AllocatedBytes != wantB-wantA {
		t.Errorf("delta %d, want %d", d.Delta.AllocatedBytes, wantB-wantA)
	}
	// compute_logprobs holds the fp32 copy and log_softmax's output at
	// the peak (and the 8 KiB gather): the largest difference, added.
	upcast := jsonNumber(t, "peak_upcast/expected.json", "bytes", "logits_fp32_upcast")
	softmax := jsonNumber(t, "peak_upcast/expected.json", "bytes", "log_softmax_fp32")
	top := d.Callsites.Rows[0]
	if top.Name != "compute_logprobs (peak_upcast.py)" || top.Change != Added || top.BBytes < upcast+softmax || top.BBytes > upcast+softmax+64<<10 {
		t.Errorf("top row %s %s %d bytes, want compute_logprobs added with %d + %d", top.Change, top.Name, top.BBytes, upcast, softmax)
	}
	// The model's functions are the same in both scripts: their rows
	// join across the renamed file, and only the chunked loop is removed.
	if r := row(t, d.Callsites, "compute_logprobs_chunked"); r.Change != Removed {
		t.Errorf("compute_logprobs_chunked: %s", r.Change)
	}
	if len(d.Callsites.Rows) != 2 || d.Callsites.Unchanged != 3 {
		t.Errorf("%d rows and %d unchanged, want 2 and 3 (model_forward, build_model, main)", len(d.Callsites.Rows), d.Callsites.Unchanged)
	}

	// By line, the upcast's own line holds exactly the fp32 copy.
	d = compare(t, "peak_chunked/peak_chunked.pickle.gz", "peak_upcast/peak_upcast.pickle.gz", Options{Lines: true})
	line := scriptLine(t, "peak_upcast.py", "logits = logits.float()                          # [N, V] fp32: N*V*4 bytes")
	r := row(t, d.Callsites, "compute_logprobs (peak_upcast.py:"+line+")")
	if r.Change != Added || r.BBytes != upcast || r.BBlocks != 1 {
		t.Errorf("the upcast line: %s %d bytes in %d blocks, want added %d in 1", r.Change, r.BBytes, r.BBlocks, upcast)
	}
	if r.Place == nil || r.Place.Callsite == nil || r.Place.Callsite.Function != "compute_logprobs" {
		t.Errorf("the upcast line's place: %+v", r.Place)
	}
}

// scriptLine is the line number, as text, of a scenario script's line.
func scriptLine(t *testing.T, script, text string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "scenarios", script))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == text {
			return strconv.Itoa(i + 1)
		}
	}
	t.Fatalf("%s has no line %q", script, text)
	return ""
}

// leak_closure keeps each step's fp32 logits and vocab mask; leak_fixed,
// the same code with the fix, does not. At the end of step 4 the two
// callsites are what B adds, and the headline is torch's own
// memory_allocated at each dump.
func TestLeakClosureAgainstFixed(t *testing.T) {
	fixed, leak := "leak_fixed/step4/server_rank0_pid592.pickle.gz", "leak_closure/step4/server_rank0_pid561.pickle.gz"
	d := compare(t, fixed, leak, Options{At: Moment{Kind: End}})
	wantA := jsonNumber(t, "leak_fixed/step4/server_rank0_pid592.pickle.json", "memory_allocated")
	wantB := jsonNumber(t, "leak_closure/step4/server_rank0_pid561.pickle.json", "memory_allocated")
	if d.A.AllocatedBytes != wantA || d.B.AllocatedBytes != wantB {
		t.Errorf("allocated at the end %d -> %d, torch's memory_allocated %d -> %d", d.A.AllocatedBytes, d.B.AllocatedBytes, wantA, wantB)
	}
	for _, want := range []struct {
		name      string
		requested int64
	}{
		{"compute_next_token_logits (leak_closure.py)", jsonNumber(t, "leak_closure/expected.json", "leaked_tensors_per_step", "0", "bytes")},
		{"allocate_vocab_mask (leak_closure.py)", jsonNumber(t, "leak_closure/expected.json", "leaked_tensors_per_step", "1", "bytes")},
	} {
		r := row(t, d.Callsites, want.name)
		// Four steps' tensors, each in a block of at least its request.
		if r.Change != Added || r.BBlocks != 4 || r.BBytes < 4*want.requested || r.BBytes > 4*(want.requested+2<<20) {
			t.Errorf("%s: %s, %d bytes in %d blocks; want added, 4 blocks of %d bytes", want.name, r.Change, r.BBytes, r.BBlocks, want.requested)
		}
	}
	if len(d.Callsites.Rows) != 2 {
		t.Errorf("%d rows, want the 2 leaking callsites: %+v", len(d.Callsites.Rows), d.Callsites.Rows)
	}
	if d.Callsites.Rows[0].Name != "compute_next_token_logits (leak_closure.py)" {
		t.Errorf("largest difference first: got %s", d.Callsites.Rows[0].Name)
	}
}

// Step N of a trace is the end of that step inside it: step 3 of the step-4
// dumps is what the step-3 dumps hold at their ends.
func TestStepInTraceMatchesItsDump(t *testing.T) {
	inTrace := compare(t, "leak_fixed/step4/server_rank0_pid592.pickle.gz", "leak_closure/step4/server_rank0_pid561.pickle.gz", Options{At: Moment{Kind: Step, Step: 3}})
	dumped := compare(t, "leak_fixed/step3/server_rank0_pid592.pickle.gz", "leak_closure/step3/server_rank0_pid561.pickle.gz", Options{At: Moment{Kind: Step, Step: 3}})
	if !strings.HasPrefix(inTrace.B.Label, "end of step 3 (event_loop_step#3)") || !strings.HasPrefix(dumped.B.Label, "end of step 3 (the dump)") {
		t.Errorf("labels %q and %q", inTrace.B.Label, dumped.B.Label)
	}
	if inTrace.A.AllocatedBytes != dumped.A.AllocatedBytes || inTrace.B.AllocatedBytes != dumped.B.AllocatedBytes {
		t.Errorf("step 3 in the trace: %d -> %d; the step-3 dumps: %d -> %d",
			inTrace.A.AllocatedBytes, inTrace.B.AllocatedBytes, dumped.A.AllocatedBytes, dumped.B.AllocatedBytes)
	}
	for k, r := range dumped.Callsites.Rows {
		if g := inTrace.Callsites.Rows[k]; g.Key != r.Key || g.DeltaBytes != r.DeltaBytes {
			t.Errorf("row %d: %s %d in the trace, %s %d in the dumps", k, g.Name, g.DeltaBytes, r.Name, r.DeltaBytes)
		}
	}
	_, err := Compare("", side(t, "leak_fixed/step4/server_rank0_pid592.pickle.gz"), side(t, "leak_closure/step4/server_rank0_pid561.pickle.gz"), Options{At: Moment{Kind: Step, Step: 9}})
	if err == nil || !strings.Contains(err.Error(), "no step 9 among the trace's 4 steps") {
		t.Errorf("step 9: %v", err)
	}
}

// frag_growth_expandable is frag_growth under expandable_segments: the
// settings say so, the same allocations are live, and far less is
// reserved (560 MiB against 1.13 GiB, as recorded on the GPU).
func TestFragGrowthSettings(t *testing.T) {
	a, b := side(t, "frag_growth/step4/rollout_rank0_pid656.pickle.gz"), side(t, "frag_growth_expandable/step4/rollout_rank0_pid718.pickle.gz")
	p, err := Compare("", a, b, Options{At: Moment{Kind: End}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Setting{
		{Key: "PYTORCH_CUDA_ALLOC_CONF", A: `""`, B: `"expandable_segments:True"`},
		{Key: "expandable_segments", A: "False", B: "True"},
	}
	if len(p.Settings) != len(want) || p.Settings[0] != want[0] || p.Settings[1] != want[1] {
		t.Errorf("settings %+v, want %+v", p.Settings, want)
	}
	if p.TorchVersionsDiffer || p.A.TorchVersion != "2.11.0+cu130" {
		t.Errorf("torch versions %q, %q (differ %v)", p.A.TorchVersion, p.B.TorchVersion, p.TorchVersionsDiffer)
	}
	d := p.Devices[0]
	checkSums(t, d)
	reservedA := jsonNumber(t, "frag_growth/step4/rollout_rank0_pid656.pickle.json", "max_memory_reserved")
	reservedB := jsonNumber(t, "frag_growth_expandable/step4/rollout_rank0_pid718.pickle.json", "max_memory_reserved")
	if *d.A.PeakReservedBytes != reservedA || *d.B.PeakReservedBytes != reservedB || *d.Delta.PeakReservedBytes != reservedB-reservedA {
		t.Errorf("reserved peaks %d -> %d, torch's max_memory_reserved %d -> %d", *d.A.PeakReservedBytes, *d.B.PeakReservedBytes, reservedA, reservedB)
	}
	if len(d.Callsites.Rows) != 0 || d.Delta.AllocatedBytes != 0 {
		t.Errorf("at the end: %d rows, allocated delta %d; want the same live memory", len(d.Callsites.Rows), d.Delta.AllocatedBytes)
	}
}

// One program recorded with stacks="python" and with stacks="all" is the
// same memory: without lines, the backward blocks group by backward() call
// whether or not C++ frames name their autograd node; by line they split.
func TestStacksPythonAgainstAll(t *testing.T) {
	d := compare(t, "depth_loss_upcast/depth_loss_upcast.pickle.gz", "depth_loss_upcast_all/depth_loss_upcast_all.pickle.gz", Options{})
	if len(d.Callsites.Rows) != 0 || d.Delta.AllocatedBytes != 0 {
		t.Errorf("%d rows, delta %d: want no difference", len(d.Callsites.Rows), d.Delta.AllocatedBytes)
	}
	d = compare(t, "depth_loss_upcast/depth_loss_upcast.pickle.gz", "depth_loss_upcast_all/depth_loss_upcast_all.pickle.gz", Options{Lines: true})
	r := row(t, d.Callsites, "the autograd engine during backward() at train_step")
	if r.Change != Removed {
		t.Errorf("python stacks' backward row: %s", r.Change)
	}
	for _, node := range []string{"(LogSoftmaxBackward0)", "(NllLossBackward0)"} {
		found := false
		for _, r := range d.Callsites.Rows {
			found = found || strings.HasSuffix(r.Name, node) && r.Change == Added
		}
		if !found {
			t.Errorf("no added row for %s", node)
		}
	}
}

// train_deep_leak keeps each iteration's logits (the LM head's output,
// allocated under the model's forward); train_deep does not. At the end the
// difference is torch's memory_allocated difference, all of it activation
// of the model's forward: 5 iterations' logits.
func TestTrainDeepLeakByCategory(t *testing.T) {
	d := compare(t, "train_deep/train_deep.pickle.gz", "train_deep_leak/train_deep_leak.pickle.gz", Options{At: Moment{Kind: End}})
	want := jsonNumber(t, "train_deep_leak/train_deep_leak.pickle.json", "memory_allocated") - jsonNumber(t, "train_deep/train_deep.pickle.json", "memory_allocated")
	if d.Delta.AllocatedBytes != want {
		t.Errorf("delta %d, torch's memory_allocated delta %d", d.Delta.AllocatedBytes, want)
	}
	logits := jsonNumber(t, "train_deep_leak/expected.json", "logits_bytes")
	iterations := jsonNumber(t, "train_deep_leak/expected.json", "iterations")
	for _, c := range []struct {
		table *Table
		name  string
	}{
		{d.Categories, "activation"},
		{d.Callsites, "forward (_deep.py)"},
		{d.Modules, "TinyGPT > "},
	} {
		r := row(t, c.table, c.name)
		if r.Change != Added || r.DeltaBytes != want || int64(r.BBlocks) != iterations || r.BBytes < iterations*logits {
			t.Errorf("%s: %s %d bytes in %d blocks; want added %d in %d blocks of the %d-byte logits", c.name, r.Change, r.DeltaBytes, r.BBlocks, want, iterations, logits)
		}
		if len(c.table.Rows) != 1 {
			t.Errorf("%s table: %d rows, want the one", c.name, len(c.table.Rows))
		}
	}
}

// By limits the tables; without category and module nothing is labelled.
func TestOptionsBy(t *testing.T) {
	p, err := Compare("", side(t, "peak_chunked/peak_chunked.pickle.gz"), side(t, "peak_upcast/peak_upcast.pickle.gz"), Options{By: []breakdown.By{breakdown.ByCategory}})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Devices[0]
	if d.Callsites != nil || d.Modules != nil || d.Categories == nil {
		t.Errorf("tables: callsite %v, category %v, module %v; want the category table alone", d.Callsites != nil, d.Categories != nil, d.Modules != nil)
	}
}

// A process on three GPUs against a dump without a trace on one: devices
// pair by ordinal, the missing ones are all added, and peaks are only
// compared where both sides have a trace.
func TestDevicesByOrdinal(t *testing.T) {
	load := func(path string) *Side {
		sn := testutil.Snapshot(t, path)
		tls, err := replay.Devices(sn)
		if err != nil {
			t.Fatal(err)
		}
		return &Side{Path: path, Snapshot: sn, Timelines: tls}
	}
	p, err := Compare("", load("../testdata/shapes/no_trace.pickle"), load("../testdata/shapes/three_gpus.pickle"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Devices) != 3 {
		t.Fatalf("%d devices, want 3", len(p.Devices))
	}
	for k, d := range p.Devices {
		checkSums(t, d)
		if d.B.Device != k || d.B.PeakAllocatedBytes == nil || d.A.PeakAllocatedBytes != nil || d.Delta.PeakAllocatedBytes != nil {
			t.Errorf("device %d: B cuda:%d, peaks A %v B %v delta %v", k, d.B.Device, d.A.PeakAllocatedBytes, d.B.PeakAllocatedBytes, d.Delta.PeakAllocatedBytes)
		}
		wantA := -1 // A has cuda:0 alone
		if k == 0 {
			wantA = 0
		}
		if d.A.Device != wantA {
			t.Errorf("device %d: A cuda:%d, want %d", k, d.A.Device, wantA)
		}
		if k > 0 && (d.Delta.AllocatedBytes != d.B.AllocatedBytes || d.Callsites.Rows[0].Change != Added) {
			t.Errorf("cuda:%d, absent from A: delta %d of %d, top row %s", k, d.Delta.AllocatedBytes, d.B.AllocatedBytes, d.Callsites.Rows[0].Change)
		}
	}
	if d := p.Devices[0]; d.A.Event != replay.BeforeRecording || d.A.Label != "end (no trace: the dump)" {
		t.Errorf("no trace: event %d, label %q", d.A.Event, d.A.Label)
	}
}
