package summary

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTorchMemoryStats checks stats's four byte figures against torch's own
// torch.cuda.memory_stats(), recorded at dump time next to every real GPU
// snapshot in testdata/scenarios (the *.pickle.json sidecars).
func TestTorchMemoryStats(t *testing.T) {
	sidecars, err := filepath.Glob("../testdata/scenarios/out/*/*.pickle.json")
	more, _ := filepath.Glob("../testdata/scenarios/out/*/step*/*.pickle.json")
	sidecars = append(sidecars, more...)
	if err != nil || len(sidecars) < 20 {
		t.Fatalf("found %d sidecars (%v), want every scenario's", len(sidecars), err)
	}
	for _, sc := range sidecars {
		snap := strings.TrimSuffix(sc, ".json") + ".gz"
		t.Run(strings.TrimPrefix(snap, "../testdata/scenarios/out/"), func(t *testing.T) {
			raw, err := os.ReadFile(sc)
			if err != nil {
				t.Fatal(err)
			}
			var torch map[string]any
			if err := json.Unmarshal(raw, &torch); err != nil {
				t.Fatal(err)
			}
			s := Of(readFixture(t, snap))
			if len(s.Devices) != 1 {
				t.Fatalf("devices = %d, want 1", len(s.Devices))
			}
			d := s.Devices[0]
			for key, got := range map[string]uint64{
				"reserved_bytes.all.current":  d.ReservedBytes,
				"allocated_bytes.all.current": d.AllocatedBytes,
				"active_bytes.all.current":    d.ActiveBytes,
				"requested_bytes.all.current": d.RequestedBytes,
			} {
				want, ok := torch[key].(float64)
				if !ok {
					t.Fatalf("sidecar has no %s", key)
				}
				if got != uint64(want) {
					t.Errorf("%s = %d, torch says %d", key, got, uint64(want))
				}
			}
		})
	}
}
