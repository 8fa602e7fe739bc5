package callsite

import (
	"testing"

	"github.com/vramscope/vramscope/snapshot"
)

// The frames of the depth_loss_upcast scenario's upcast, innermost first:
// transformers' ForCausalLMLoss calls logits.float() under the model's
// forward, which train_step called.
var (
	hfLoss    = snapshot.Frame{Name: "ForCausalLMLoss", Filename: "/usr/local/lib/python3.12/dist-packages/transformers/loss/loss_utils.py", Line: 59}
	hfForward = snapshot.Frame{Name: "forward", Filename: "/usr/local/lib/python3.12/dist-packages/transformers/models/llama/modeling_llama.py", Line: 471}
	hfWrapper = snapshot.Frame{Name: "wrapper", Filename: "/usr/local/lib/python3.12/dist-packages/transformers/utils/generic.py", Line: 918}
	callImpl  = snapshot.Frame{Name: "_call_impl", Filename: "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", Line: 1786}
	trainStep = snapshot.Frame{Name: "train_step", Filename: "/work/train.py", Line: 75}
	mainFrame = snapshot.Frame{Name: "main", Filename: "/work/train.py", Line: 90}
	ceFrame   = snapshot.Frame{Name: "cross_entropy", Filename: "/usr/local/lib/python3.12/dist-packages/torch/nn/functional.py", Line: 3462}
	venvLlama = snapshot.Frame{Name: "forward", Filename: "/opt/torch/.venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py", Line: 480}
	ctxlib    = snapshot.Frame{Name: "inner", Filename: "/usr/lib/python3.12/contextlib.py", Line: 81}
)

func TestOrigin(t *testing.T) {
	tests := []struct {
		name          string
		focus, ignore string
		stack         []snapshot.Frame
		origin        snapshot.Frame // zero: none
		via           []snapshot.Frame
		below         bool
	}{
		{"library line under the user's", "", "",
			[]snapshot.Frame{hfLoss, hfForward, hfWrapper, callImpl, trainStep, mainFrame},
			hfLoss, []snapshot.Frame{hfLoss, hfForward, hfWrapper}, true},
		{"torch, C++ and the standard library are skipped", "", "",
			join(captureFrames, []snapshot.Frame{ceFrame, ctxlib, hfLoss, callImpl, trainStep}),
			hfLoss, []snapshot.Frame{hfLoss}, true},
		{"the user's own line is its own origin", "", "",
			[]snapshot.Frame{ceFrame, trainStep, mainFrame},
			trainStep, nil, false},
		{"only library frames: an origin, no callsite", "", "",
			[]snapshot.Frame{ceFrame, hfLoss, hfForward},
			hfLoss, []snapshot.Frame{hfLoss, hfForward}, true},
		{"torch alone", "", "", []snapshot.Frame{ceFrame, callImpl}, snapshot.Frame{}, nil, false},
		{"ignore skips a library frame", "", "loss_utils",
			[]snapshot.Frame{hfLoss, hfForward, trainStep},
			hfForward, []snapshot.Frame{hfForward}, true},
		{"focus makes the library line the callsite and its own origin", "transformers/loss", "",
			[]snapshot.Frame{hfLoss, hfForward, trainStep},
			hfLoss, nil, false},
		{"a venv under a folder named torch is no torch", "", "",
			[]snapshot.Frame{{Name: "forward", Filename: "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", Line: 134}, venvLlama, trainStep},
			venvLlama, []snapshot.Frame{venvLlama}, true},
		{"the via stops at four frames", "", "",
			[]snapshot.Frame{hfLoss, hfForward, hfWrapper, hfForward, hfWrapper, trainStep},
			hfLoss, []snapshot.Frame{hfLoss, hfForward, hfWrapper, hfForward}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFilter(tt.focus, tt.ignore)
			if err != nil {
				t.Fatal(err)
			}
			sn, id := stackOf(tt.stack...)
			o := f.Origin(sn, id)
			if o.Known() != (tt.origin != snapshot.Frame{}) || o.Known() && o.Frame != tt.origin {
				t.Fatalf("origin %v (known %v), want %v", o.Frame, o.Known(), tt.origin)
			}
			if len(o.Via) != len(tt.via) {
				t.Fatalf("via %v, want %v", o.Via, tt.via)
			}
			for i := range o.Via {
				if o.Via[i] != tt.via[i] {
					t.Errorf("via[%d] = %v, want %v", i, o.Via[i], tt.via[i])
				}
			}
			if o.Known() && o.Frame == hfLoss && o.String() != "ForCausalLMLoss (transformers/loss/loss_utils.py:59)" {
				t.Errorf("String() = %q", o.String())
			}
			if got := o.Below(f.Site(sn, id)); got != tt.below {
				t.Errorf("Below = %v, want %v", got, tt.below)
			}
		})
	}
}
