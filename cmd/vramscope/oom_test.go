package main

import (
	"os"
	"strings"
	"testing"
)

// seed002OOM is the first OOM message of seed 002 (verl, upcast logits).
const seed002OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.05 GiB. GPU 0 has a total capacity of 79.10 GiB of which 5.94 GiB is free. Process 428408 has 73.15 GiB memory in use. Of the allocated memory 65.99 GiB is allocated by PyTorch, with 80.15 MiB allocated in private pools (e.g., CUDA Graphs), and 4.45 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"

func TestOOMGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	fragOOM, err := os.ReadFile("testdata/scenarios/out/frag_oom/oom_message.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"oom-seed002", []string{"oom", seed002OOM}, []string{"6.05 GiB", "4.45 GiB", "expandable_segments:True", "in chunks"}},
		{"oom-frag_oom", []string{"oom", string(fragOOM)}, []string{"3.00 GiB", "1.09 GiB", "this OOM is fragmentation"}},
		{"oom-file", []string{"oom", "--file", "testdata/scenarios/out/frag_oom/oom_message.txt"}, []string{"capped this process at 3.00 GiB"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d; stderr:\n%s", c.name, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s: output lacks %q", c.name, w)
			}
		}
		if c.name != "oom-file" {
			checkGolden(t, golden, c.name+".txt", stdout)
		}
	}
	if code, _, stderr := runCmd("oom", "no message here"); code != exitInputError || !strings.Contains(stderr, "CUDA out of memory") {
		t.Errorf("text without a message: exit %d, stderr %q", code, stderr)
	}
}
