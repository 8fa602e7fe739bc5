package breakdown

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/internal/testutil"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// trace builds a snapshot event by event.
type trace struct {
	sn       *snapshot.Snapshot
	events   []snapshot.Event
	contexts []snapshot.Context
	md       snapshot.StringID
	next     uint64
}

func newTrace() *trace { return &trace{sn: snapshot.New(), next: 0x7f0000000000} }

// alloc allocates size bytes from frames given outermost first.
func (tr *trace) alloc(size uint64, frames ...snapshot.Frame) uint64 {
	addr := tr.next
	tr.next += replay.RoundSize(size)
	ids := make([]snapshot.FrameID, len(frames))
	for i, fr := range frames {
		ids[len(frames)-1-i] = tr.sn.InternFrame(fr)
	}
	tr.push(snapshot.Event{Action: snapshot.ActionAlloc, Addr: addr, Size: size, Stack: tr.sn.InternStack(ids)})
	return addr
}

func (tr *trace) free(addr, size uint64, frames ...snapshot.Frame) {
	ids := make([]snapshot.FrameID, len(frames))
	for i, fr := range frames {
		ids[len(frames)-1-i] = tr.sn.InternFrame(fr)
	}
	tr.push(snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: addr, Size: size, Stack: tr.sn.InternStack(ids)})
	tr.push(snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: addr, Size: size})
}

func (tr *trace) push(e snapshot.Event) {
	e.TimeUS = int64(1_000_000 + 10*len(tr.events))
	tr.events = append(tr.events, e)
	tr.contexts = append(tr.contexts, snapshot.Context{UserMetadata: tr.md})
}

func (tr *trace) classify(t *testing.T, opts Options) *Breakdown {
	t.Helper()
	tr.sn.Traces = []snapshot.Trace{snapshot.NewTrace(tr.events, tr.contexts)}
	tl, err := replay.Device(tr.sn, 0)
	if err != nil {
		t.Fatal(err)
	}
	return Classify(tr.sn, tl, opts)
}

var (
	callImpl = snapshot.Frame{Name: "_call_impl", Filename: "/venv/site-packages/torch/nn/modules/module.py", Line: 1790}
	loop     = snapshot.Frame{Name: "train", Filename: "/home/u/train.py", Line: 20}
)

// TestModules: a forward's blocks name the chain of modules that
// allocated them, by class where the source is readable, by file and
// line where not, and by the exact name the hook's metadata gives.
func TestModules(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.py")
	src := "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return self.mlp(x)\n\n\nclass MLP(torch.nn.Module):\n    def forward(self, x):\n        h = self.up(x)\n        return h\n"
	if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	netFwd := snapshot.Frame{Name: "forward", Filename: model, Line: 5}
	mlpFwd := snapshot.Frame{Name: "forward", Filename: model, Line: 10}
	gone := snapshot.Frame{Name: "forward", Filename: "/elsewhere/model.py", Line: 10}

	tr := newTrace()
	a := tr.alloc(4096, loop, callImpl, netFwd, callImpl, mlpFwd)
	b := tr.alloc(4096, loop, callImpl, gone)
	tr.md = tr.sn.InternString("step=2;module=Net.layers.3.mlp")
	c := tr.alloc(4096, loop, callImpl, netFwd, callImpl, mlpFwd)
	tr.md = 0
	for _, addr := range []uint64{a, b, c} {
		tr.free(addr, 4096, loop, callImpl, netFwd)
	}
	bd := tr.classify(t, Options{Source: &callsite.Source{}})
	want := []string{"Net > MLP", "model.py:10", "Net.layers.3.mlp"}
	for k, w := range want {
		if l := bd.Label(k); l.Module != w || l.Category != Temporary {
			t.Errorf("block %d: module %q, category %s; want %q, temporary (freed inside a forward)", k, l.Module, l.Category, w)
		}
	}
	tab := bd.Table(2, ByModule)
	if tab.Bytes("Net > MLP") != 4096 || tab.Bytes("Net.layers.3.mlp") != 4096 || tab.Total != 3*4096 {
		t.Errorf("by module at event 2: %v", tab.Rows)
	}
}

// TestUserRules: rules run first, in order, on frames, annotations and
// metadata; a rule naming a built-in category files blocks there.
func TestUserRules(t *testing.T) {
	rules, err := ParseRules(strings.NewReader(`
# split an RL job
rollout    frame       ^generate \(
reference  annotation  ^ref_forward
activation metadata    actor
`))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTrace()
	tr.alloc(512, loop, snapshot.Frame{Name: "generate", Filename: "/home/u/rollout.py", Line: 3})
	tr.sn.Annotations = []snapshot.Annotation{
		{Name: "ref_forward", Stage: "START", TimeUS: 1_000_005},
		{Name: "ref_forward", Stage: "END", TimeUS: 1_000_015},
	}
	tr.alloc(512, loop)
	tr.md = tr.sn.InternString("role=actor")
	tr.alloc(512, loop)
	tr.md = 0
	tr.alloc(512, loop)
	bd := tr.classify(t, Options{Rules: rules})
	for k, want := range []Category{"rollout", "reference", Activation, Unknown} {
		if got := bd.Label(k).Category; got != want {
			t.Errorf("block %d: %s (%s), want %s", k, got, bd.Label(k).Rule, want)
		}
	}
	cats := bd.Categories()
	if n := len(cats); n != len(builtin)+2 || cats[n-2] != "rollout" || cats[n-1] != "reference" {
		t.Errorf("categories %v: want the built-in ones, then rollout and reference", cats)
	}
	for _, bad := range []string{"x frame", "x stack foo", "9x frame a", "x frame (", "x annotation"} {
		if _, err := ParseRules(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseRules(%q): no error", bad)
		}
	}
}

// TestHookModuleNamesOnGPU: `vramscope record --module-names` on
// scripts/e2e/llama_train.py (a 6-layer transformers Llama, fp32, AdamW,
// H100, testdata/breakdown/out/record): the hook's metadata names every
// decoder layer's MLP projections exactly, each one output of 8 x 512 x
// 1408 float32 at the peak.
func TestHookModuleNamesOnGPU(t *testing.T) {
	sn := testutil.Snapshot(t, filepath.Join("..", "testdata", "breakdown", "out", "record", "llama_train_rank0_pid469.pickle.gz"))
	tls, err := replay.Devices(sn)
	if err != nil {
		t.Fatal(err)
	}
	bd := Classify(sn, tls[0], Options{})
	tab := bd.Table(Peak(tls[0]).Event, ByModule)
	const out = 8 * 512 * 1408 * 4
	for layer := range 6 {
		for _, proj := range []string{"gate_proj", "up_proj"} {
			name := fmt.Sprintf("LlamaForCausalLM.model.layers.%d.mlp.%s", layer, proj)
			if got := tab.Bytes(name); got != out {
				t.Errorf("%s: %d B at the peak, want %d", name, got, out)
			}
		}
	}
}
