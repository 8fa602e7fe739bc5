package hugepage

import (
	"os"
	"strings"
	"testing"
)

// Advise takes any slice, small or large, empty or not, and the kernel
// then backs a large fresh buffer with huge pages where THP is available.
func TestAdvise(t *testing.T) {
	Advise([]int64(nil))
	Advise(make([]byte, 10))
	Advise(make([]byte, 0, 3*size-1)[:5])

	big := make([]uint64, 16*size/8) // 32 MiB, never touched before Advise
	Advise(big)
	for i := 0; i < len(big); i += 512 {
		big[i] = uint64(i)
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		return // no THP here: the advice is a no-op, which is all Advise promises
	}
	smaps, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(smaps), "\n") {
		if strings.HasPrefix(line, "AnonHugePages:") && strings.Fields(line)[1] == "0" {
			t.Errorf("THP is on but no huge pages back a 32 MiB buffer advised before its first touch")
		}
	}
}
