package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/watch/gpu/gputest"
	"github.com/vramscope/vramscope/watch/history"
	"github.com/vramscope/vramscope/watch/proc"
)

// livePIDs returns up to n pids of this machine's processes, so that the
// cost includes reading real /proc files.
func livePIDs(t testing.TB, n int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids[:min(n, len(pids))]
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSamplerCost measures the CPU time of one sample of 8 GPUs and 40
// processes (real /proc entries, mock NVML, history on disk, verdicts):
// at 1 Hz it must stay under 1 % of one core, 10 ms a sample.
// bench/RESULTS.md quotes what it logs.
func TestSamplerCost(t *testing.T) {
	node := gputest.NewNode(8)
	pids := livePIDs(t, 40)
	store, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, _ := newAgent(t, node, &proc.Reader{Root: "/proc"}, store, nil)
	const samples = 900
	step := func(s int) {
		for i, pid := range pids {
			node.Set(i%8, uint32(pid), uint64(4096+s/10+i)*gputest.MiB)
		}
		a.Step(t0.Add(time.Duration(s) * time.Second))
	}
	step(0) // names every process once
	begin, wall := cpuTime(), time.Now()
	for s := 1; s <= samples; s++ {
		step(s)
	}
	cpu := (cpuTime() - begin) / samples
	st := a.State()
	t.Logf("%d processes on 8 GPUs: %v CPU a sample (%.3f%% of a core at 1 Hz), %v wall; agent's own count %.0f µs",
		len(st.Processes), cpu, 100*cpu.Seconds(), time.Since(wall)/samples, 1e6*st.SampleSeconds/float64(st.Samples))
	if len(st.Processes) != len(pids) {
		t.Errorf("%d processes, want %d", len(st.Processes), len(pids))
	}
	if cpu > 10*time.Millisecond {
		t.Errorf("%v CPU a sample: over 1%% of a core at 1 Hz", cpu)
	}
}
