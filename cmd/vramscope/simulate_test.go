package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulate runs simulate on the scenarios whose fix was recorded too:
// its predictions are those recorded runs' numbers.
func TestSimulate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		reserved uint64 // the variant's recorded reserved peak
		oom      bool
	}{
		{"expandable avoids frag_oom's OOM",
			[]string{"--set", "expandable_segments:True", "testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}, 0, 2684354560, false},
		{"the recorded settings keep the OOM, a CI gate trips",
			[]string{"--fail-on", "oom", "testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}, exitGate, 0, true},
		{"empty_cache at each step's end",
			[]string{"--empty-cache-after", "step", "testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz"}, 0, 677380096, false},
		// The H100 runs of testdata/allocsim/out/truths.json: fsdp_gather
		// under a 2474000384-byte cap ran out of memory with the default
		// settings and fitted in 2348810240 bytes with expandable segments.
		{"a cap: the default settings run out of memory",
			[]string{"--limit", "2474000384", "testdata/allocsim/out/fsdp_gather/default.pickle.gz"}, 0, 0, true},
		{"a cap: expandable segments fit",
			[]string{"--limit", "2474000384", "--set", "expandable_segments:True", "testdata/allocsim/out/fsdp_gather/default.pickle.gz"}, 0, 2348810240, false},
		{"expandable segments on frag_growth",
			[]string{"--set", "expandable_segments:True", "testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz"}, 0, 587202560, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"simulate", "--json"}, tc.args...)
			args[len(args)-1] = "../../" + args[len(args)-1]
			if code := run(context.Background(), &out, &errb, args); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errb.String())
			}
			var r simulateReport
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			if r.Version != 1 || len(r.Devices) != 1 {
				t.Fatalf("version %d, %d devices", r.Version, len(r.Devices))
			}
			d := r.Devices[0]
			if !d.Validation.Exact {
				t.Errorf("validation not exact: %s", d.Validation.FirstDivergence)
			}
			if d.Predicted.OOM != tc.oom || tc.reserved != 0 && d.Predicted.MaxReserved != tc.reserved {
				t.Errorf("predicted reserved %d oom %v, want %d %v", d.Predicted.MaxReserved, d.Predicted.OOM, tc.reserved, tc.oom)
			}
		})
	}
}

func TestSimulateRecommend(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &out, &errb, []string{"simulate", "--json", "--recommend", "../../testdata/scenarios/out/frag_growth/step4/rollout_rank0_pid656.pickle.gz"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r simulateReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	recs := r.Devices[0].Recommendations
	if len(recs) < 5 || recs[0].Settings != "expandable_segments:True" || recs[0].MaxReserved != 587202560 {
		t.Fatalf("best candidate %+v of %d, want expandable_segments:True at 587202560 B", recs[0], len(recs))
	}
	worse := false
	for _, c := range recs {
		worse = worse || c.Worse && c.Name == "max_split_size_mb:64"
	}
	if !worse {
		t.Error("max_split_size_mb:64 raises the peak (1.29 GiB against 1.13 GiB) but is not marked worse")
	}
}

// TestSimulateWithoutRequests: a snapshot with no trace, or a trace with no
// allocation, says what simulate needs and exits 2.
func TestSimulateWithoutRequests(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"snapshot/testdata/legacy/v1_12_list.pickle", "holds no trace"},
		{"snapshot/testdata/format/state_only.pickle", "holds no allocation"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), &out, &errb, []string{"simulate", "../../" + tc.path}); code != exitInputError {
			t.Errorf("%s: exit %d, want %d", tc.path, code, exitInputError)
		}
		if !strings.Contains(errb.String(), tc.want) || !strings.Contains(errb.String(), "_record_memory_history") {
			t.Errorf("%s: message %q lacks %q and how to record", tc.path, errb.String(), tc.want)
		}
	}
}

// TestSimulateText: the side-by-side table names where each run ran out
// of memory, with the request's stack.
func TestSimulateText(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &out, &errb, []string{"simulate", "--set", "max_split_size_mb:256", "../../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"validation: exact",
		"settings                 (defaults)             max_split_size_mb:256",
		"recorded OOM: 600.00 MiB requested (600.00 MiB rounded, cudaMalloc 600.00 MiB) with 2.50 GiB reserved of a 3.09 GiB cap (memory fraction)",
		"    at allocate_logits_workspace (/work/main/testdata/scenarios/frag_oom.py:57)\n      from main (/work/main/testdata/scenarios/frag_oom.py:74)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
