package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/memlog"
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

// TestOOMJSON checks that --json prints the explanation the text report
// prints, with the message's facts under their _bytes keys, absent facts
// absent, and the cause.
func TestOOMJSON(t *testing.T) {
	code, stdout, stderr := runCmd("oom", "--json", seed002OOM)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var got struct {
		Messages []struct {
			Message map[string]any `json:"message"`
			// In a container NVML lists this process by its host pid.
			ThisProcessPID *int     `json:"this_process_pid"`
			Cause          string   `json:"cause"`
			Contributing   []string `json:"contributing"`
			Explanation    string   `json:"explanation"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v in:\n%s", err, stdout)
	}
	if len(got.Messages) != 1 {
		t.Fatalf("%d messages, want 1", len(got.Messages))
	}
	m := got.Messages[0]
	msgs, err := memlog.ParseOOMMessages(strings.NewReader(seed002OOM))
	if err != nil {
		t.Fatal(err)
	}
	want := diagnose.ExplainMessage(msgs[0])
	_, text, _ := runCmd("oom", seed002OOM)
	_, hasAllowed := m.Message["allowed_bytes"]
	if m.Message["wording"] != "torch >= 2.3" || m.Message["tried_to_allocate_bytes"] != float64(*want.Message.TriedToAllocate) || hasAllowed ||
		m.ThisProcessPID == nil || *m.ThisProcessPID != 428408 || m.Cause != "peak" || !slices.Equal(m.Contributing, []string{"fragmentation"}) ||
		m.Explanation != want.Explanation || !strings.Contains(text, m.Explanation) || !strings.Contains(text, "cause: peak") {
		t.Errorf("got %+v, want %+v; text report:\n%s", m, want, text)
	}
}

// TestOOMEveryWording runs oom on one real message of each source: every
// one is explained, none is "not an OOM message".
func TestOOMEveryWording(t *testing.T) {
	fromRepoRoot(t)
	for _, c := range []struct{ file, cause string }{
		{"008-gtad-cached.txt", "cause: peak"},
		{"039-cudamallocasync-device-limit.txt", "cause: fragmentation"},
		{"056-iim-cuda-error-oom.txt", "cause: outside_allocator"},
		{"064-nccl-calloc-oom-multinode.txt", "cause: outside_allocator"},
		{"109-llamafactory-wrong-gpu-26gib-elsewhere.txt", "cause: other_processes"},
	} {
		code, stdout, stderr := runCmd("oom", "--file", "testdata/oom/"+c.file)
		if code != exitOK || !strings.Contains(stdout, c.cause) {
			t.Errorf("%s: exit %d, stderr %q, output lacks %q:\n%s", c.file, code, stderr, c.cause, stdout)
		}
	}
}

// TestAnalyzeOOMMessages runs analyze on the corpus of real messages: a
// process per file (more where a file's log prefixes name several ranks),
// an oom finding per message with its cause, no totals nobody measured, and
// the explanation oom prints for the same message.
func TestAnalyzeOOMMessages(t *testing.T) {
	fromRepoRoot(t)
	code, stdout, stderr := runCmd("analyze", "--json", "testdata/oom")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var rep analyze.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/oom/[0-9]*.txt")
	if err != nil {
		t.Fatal(err)
	}
	findings := 0
	for _, p := range rep.Processes {
		if p.Verdict != analyze.OOM {
			t.Errorf("%s: verdict %s, want oom", p.ID, p.Verdict)
		}
		for _, f := range p.Findings {
			if f.Kind == diagnose.KindOOM && f.Evidence["cause"] != nil {
				findings++
			}
		}
	}
	if rep.Verdict != analyze.OOM || len(rep.Processes) < len(files) || findings < len(files) {
		t.Errorf("verdict %s, %d processes and %d oom findings for %d files", rep.Verdict, len(rep.Processes), findings, len(files))
	}

	_, text, _ := runCmd("analyze", "testdata/oom/109-llamafactory-wrong-gpu-26gib-elsewhere.txt", "testdata/oom/001-moss-ttsd-sglang-json.txt")
	_, oom, _ := runCmd("oom", "--json", "--file", "testdata/oom/109-llamafactory-wrong-gpu-26gib-elsewhere.txt")
	var one struct {
		Messages []diagnose.MessageReport `json:"messages"`
	}
	if err := json.Unmarshal([]byte(oom), &one); err != nil || len(one.Messages) != 1 {
		t.Fatalf("oom --json: %v\n%s", err, oom)
	}
	if !strings.HasPrefix(text, "verdict: oom (2 processes: 2 oom; 2 out-of-memory errors)") || strings.Contains(text, "last: allocated") ||
		!strings.Contains(text, "fix: "+one.Messages[0].Fix) || !strings.Contains(one.Messages[0].Explanation, one.Messages[0].Fix) ||
		one.Messages[0].Cause != diagnose.CauseOtherProcesses {
		t.Errorf("analyze of two message files:\n%s\noom says %s: %s", text, one.Messages[0].Cause, one.Messages[0].Explanation)
	}
}
