package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Frames of a synthetic transformer as torch records them: the script calls
// model(x), nn.Module's call machinery calls Model.forward, which embeds
// the tokens, runs every block (for block in self.blocks, line 22) and
// applies the head; Block.forward allocates at lines 10 and 11.
var (
	moduleCall = []snapshot.Frame{
		{Name: "_wrapped_call_impl", Filename: "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", Line: 1739},
		{Name: "_call_impl", Filename: "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", Line: 1750},
	}
	modelEmbed  = snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 20}
	modelBlocks = snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 22}
	modelHead   = snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 24}
)

func script(line uint64) snapshot.Frame {
	return snapshot.Frame{Name: "<module>", Filename: "/home/u/train.py", Line: line}
}

// frames joins frames and frame lists, outermost first.
func frames(parts ...any) []snapshot.Frame {
	var out []snapshot.Frame
	for _, p := range parts {
		switch p := p.(type) {
		case snapshot.Frame:
			out = append(out, p)
		case []snapshot.Frame:
			out = append(out, p...)
		}
	}
	return out
}

// block is one allocation of the synthetic model: its size and stack.
type block struct {
	addr, size uint64
}

// forward runs the synthetic model with layers blocks, called from line of
// the script. With grad, every block keeps its two activations for
// backward (they are returned, to be freed by backward); without, each is
// freed once the next block has used it.
func (s *scriptTrace) forward(line uint64, layers int, grad bool) []block {
	top := frames(script(line), moduleCall)
	var kept []block
	keep := func(size uint64, fs ...snapshot.Frame) {
		kept = append(kept, block{s.allocStack(size, fs...), size})
	}
	keep(4<<20, frames(top, modelEmbed)...)
	for range layers {
		in := frames(top, modelBlocks, moduleCall)
		keep(8<<20, frames(in, snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 10})...)
		keep(2<<20, frames(in, snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 11})...)
		if !grad {
			for _, b := range kept[len(kept)-2:] {
				s.free(b.addr, b.size)
			}
			kept = kept[:len(kept)-2]
		}
	}
	keep(16<<20, frames(top, modelHead)...)
	return kept
}

// trainStep runs one training iteration at lines 50-52 of the script:
// forward, a loss (kept in a list when leak is set), backward (gradients
// made by autograd's thread, which has no Python frames; they stay) and an
// optimizer temporary.
func (s *scriptTrace) trainStep(layers int, leak bool) {
	acts := s.forward(50, layers, true)
	loss := s.allocStack(512, script(51))
	if !leak {
		defer s.free(loss, 512)
	}
	for _, b := range acts {
		s.free(b.addr, b.size)
	}
	tmp := s.allocStack(1<<20, script(52), snapshot.Frame{Name: "step", Filename: "/venv/lib/python3.12/site-packages/torch/optim/adamw.py", Line: 200})
	s.free(tmp, 1<<20)
}

// TestStepsOnePass checks that the layers of one forward pass are no steps,
// so that the activations they keep for backward are no leak, while a
// training loop around the same model has steps, and its leak is found.
func TestStepsOnePass(t *testing.T) {
	tests := []struct {
		name   string
		script func(s *scriptTrace)
		steps  int
		reason string
		leak   string // the callsite of the one leak finding; "" for none
	}{{
		name: "one grad-enabled forward of 8 layers",
		script: func(s *scriptTrace) {
			s.allocStack(64<<20, script(40))
			s.forward(50, 8, true)
		},
		reason: "one pass, no steps: the 8 repeats opened by the allocation at forward (/home/u/model.py:10) run inside one call of forward (u/model.py) at line 22, " +
			"which also allocates before them (line 20) and after them (line 24)",
	}, {
		name: "three training iterations of the same model",
		script: func(s *scriptTrace) {
			s.allocStack(64<<20, script(40))
			for range 3 {
				s.trainStep(8, false)
			}
		},
		steps: 3,
	}, {
		name: "four leaking training iterations",
		script: func(s *scriptTrace) {
			for range 4 {
				s.trainStep(8, true)
			}
		},
		steps: 4, leak: "<module> (/home/u/train.py:51)",
	}, {
		name: "an inference loop around model(x), with a cache made by the first call",
		script: func(s *scriptTrace) {
			s.allocStack(1<<20, frames(script(50), moduleCall, snapshot.Frame{Name: "forward", Filename: "/home/u/model.py", Line: 19})...)
			for range 4 {
				for _, b := range s.forward(50, 8, false) {
					s.free(b.addr, b.size)
				}
			}
		},
		steps: 4,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptTrace()
			tt.script(s)
			sn := s.build()
			tl, err := replay.Device(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := DetectSteps(sn, tl, testFilter(t))
			if len(got.Steps) != tt.steps || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("%d steps (%s), want %d with %q", len(got.Steps), got.Reason, tt.steps, tt.reason)
			}
			var leaks []string
			for _, fd := range Leak(sn, tl, got, testFilter(t)).Findings() {
				leaks = append(leaks, fmt.Sprintf("%s (%s:%d)", fd.Callsite.Function, fd.Callsite.File, fd.Callsite.Line))
			}
			if want := []string{tt.leak}; tt.leak == "" && len(leaks) > 0 || tt.leak != "" && !slices.Equal(leaks, want) {
				t.Errorf("leaks at %q, want %q", leaks, tt.leak)
			}
			if got.OnePass != (tt.steps == 0) {
				t.Errorf("OnePass = %v", got.OnePass)
			}
			if tt.steps == 0 {
				return
			}
			if got.Source != SourcePeriodicity || got.Marker != "forward (/home/u/model.py:20)" {
				t.Errorf("steps from %s %q, want the embedding opening each iteration", got.Source, got.Marker)
			}
			checkStepOrder(t, got.Steps, tl.Len())
		})
	}
}
