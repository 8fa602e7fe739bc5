package allocsim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vramscope/vramscope/allocator"
)

// truthRun is one run of testdata/allocsim/run_truth.py on a GPU.
type truthRun struct {
	Workload           string  `json:"workload"`
	Run                string  `json:"run"`
	AllocConf          string  `json:"alloc_conf"`
	EmptyCache         bool    `json:"empty_cache_at_step_end"`
	LimitBytes         *uint64 `json:"limit_bytes"`
	MaxMemoryReserved  uint64  `json:"max_memory_reserved"`
	MaxMemoryAllocated uint64  `json:"max_memory_allocated"`
	OOM                bool    `json:"oom"`
	Snapshot           string  `json:"snapshot"`
	Error              string  `json:"error"`
}

const truthDir = "../testdata/allocsim/out"

func readTruths(t *testing.T) []truthRun {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(truthDir, "truths.json"))
	if err != nil {
		t.Fatalf("the GPU ground truth (testdata/allocsim/run_truth.py's output): %v", err)
	}
	var doc struct {
		Runs []truthRun `json:"runs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Runs
}

// TestTruthWhatIfs predicts every real run from its workload's default
// run's trace, with only the setting, the cap and the empty_cache() calls
// changed, and compares with what torch measured on the GPU: the reserved
// peak (max_memory_reserved) within 2 % and the same OOM verdict.
func TestTruthWhatIfs(t *testing.T) {
	steps := regexp.MustCompile(`_step#\d+$`)
	for _, run := range readTruths(t) {
		if run.Error != "" {
			t.Logf("%s/%s failed on the GPU: %s", run.Workload, run.Run, run.Error)
			continue
		}
		t.Run(run.Workload+"/"+run.Run, func(t *testing.T) {
			sn := load(t, filepath.Join("testdata/allocsim/out", run.Workload, "default.pickle.gz"))
			s, err := allocator.Parse(run.AllocConf)
			if err != nil {
				t.Fatal(err)
			}
			var cfg Config
			if run.LimitBytes != nil {
				cfg.Limit = *run.LimitBytes
			}
			if run.EmptyCache {
				cfg.EmptyCacheAt = AnnotationEnds(sn, 0, steps)
			}
			rec, err := Record(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(sn, rec, s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if (res.OOM != nil) != run.OOM {
				t.Errorf("predicted OOM %v, the GPU run's OOM %v", res.OOM != nil, run.OOM)
			}
			if !run.OOM {
				off := math.Abs(float64(res.MaxReserved)-float64(run.MaxMemoryReserved)) / float64(run.MaxMemoryReserved)
				t.Logf("reserved peak predicted %d, measured %d (%.2f%%)", res.MaxReserved, run.MaxMemoryReserved, 100*off)
				if off > 0.02 {
					t.Errorf("reserved peak predicted %d, measured %d: %.1f%% off", res.MaxReserved, run.MaxMemoryReserved, 100*off)
				}
			}
		})
	}
}

// TestTruthValidation replays each real run's own trace under its own
// settings and cap: exact, device call by device call and allocation by
// allocation, two_streams' record_stream frees included.
func TestTruthValidation(t *testing.T) {
	for _, run := range readTruths(t) {
		if run.Error != "" || run.Snapshot == "" {
			continue
		}
		t.Run(run.Workload+"/"+run.Run, func(t *testing.T) {
			sn := load(t, filepath.Join("testdata/allocsim/out", run.Workload, run.Snapshot))
			rec, err := Record(sn, 0)
			if err != nil {
				t.Fatal(err)
			}
			if run.LimitBytes != nil {
				// The cap the run had, which the snapshot does not record:
				// garbage_collection_threshold acts only under it.
				rec.Limit, rec.LimitNote = *run.LimitBytes, ""
			}
			if rec.MaxReserved != run.MaxMemoryReserved {
				t.Errorf("the trace's reserved peak %d, torch's max_memory_reserved %d", rec.MaxReserved, run.MaxMemoryReserved)
			}
			v, _, err := Validate(sn, rec)
			if err != nil {
				t.Fatal(err)
			}
			if !v.Exact {
				t.Errorf("not exact: %s; notes %q", v.FirstDivergence, v.Notes)
			}
		})
	}
}
