package inputs

import (
	"testing"
	"time"
)

func TestParseIdentity(t *testing.T) {
	date := func(s string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.DateTime, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		path string
		want Identity
	}{
		{"actor_rank0_pid746.pickle",
			Identity{Tag: "actor", Rank: 0, HasRank: true, PID: 746, HasPID: true}},
		{"step2/rollout_rank1_pid1234.pickle.gz",
			Identity{Tag: "rollout", Rank: 1, HasRank: true, PID: 1234, HasPID: true, Step: 2, StepUnit: "step", HasStep: true}},
		{"runs/global_step_40/actor_update_rank7_pid99.pickle.zst",
			Identity{Tag: "actor_update", Rank: 7, HasRank: true, PID: 99, HasPID: true, Step: 40, StepUnit: "step", HasStep: true}},
		{"2025-06-01_12-00-00/snapshot_rank3_pid9.pickle",
			Identity{Tag: "snapshot", Rank: 3, HasRank: true, PID: 9, HasPID: true, Time: date("2025-06-01 12:00:00"), HasTime: true}},
		// verl's MemorySnapshotSampler: out_dir/%Y%m%d-%H%M/{tag}_rank{R}_pid{P}.pickle
		{"mem_snapshots/20250601-1230/periodic_rank0_pid5.pickle",
			Identity{Tag: "periodic", Rank: 0, HasRank: true, PID: 5, HasPID: true, Time: date("2025-06-01 12:30:00"), HasTime: true}},
		// The nearest folder wins; a step in the name beats any folder.
		{"step1/step3/x_rank0.pickle",
			Identity{Tag: "x", Rank: 0, HasRank: true, Step: 3, StepUnit: "step", HasStep: true}},
		{"step1/mem_step5_rank2.pickle",
			Identity{Tag: "mem_step5", Rank: 2, HasRank: true, Step: 5, StepUnit: "step", HasStep: true}},
		// Any counter in a path is a step, and says what it counts.
		{"serve/req012/server_rank0_pid3.pickle",
			Identity{Tag: "server", Rank: 0, HasRank: true, PID: 3, HasPID: true, Step: 12, StepUnit: "request", HasStep: true}},
		{"ckpt/iter_000300/actor_rank1.pickle",
			Identity{Tag: "actor", Rank: 1, HasRank: true, Step: 300, StepUnit: "iteration", HasStep: true}},
		{"runs/epoch3/snap.pickle", Identity{Step: 3, StepUnit: "epoch", HasStep: true}},
		{"Iteration-7/snap.pickle", Identity{Step: 7, StepUnit: "iteration", HasStep: true}},
		{"epoch1/mem_request9_rank0.pickle",
			Identity{Tag: "mem_request9", Rank: 0, HasRank: true, Step: 9, StepUnit: "request", HasStep: true}},
		{"rank4.pickle", Identity{Rank: 4, HasRank: true}},
		{"pid_12.pkl", Identity{PID: 12, HasPID: true}},
		{"/abs/dir/RANK-2_pid-8.pickle", Identity{Rank: 2, HasRank: true, PID: 8, HasPID: true}},
		// Names without identity.
		{"default.pickle", Identity{}},
		{"snapshot.pickle.gz", Identity{}},
		{"cranky3.pickle", Identity{}},
		{"steps/oom_dump.pickle", Identity{}},
		{"requests/iterator/epochs.pickle", Identity{}},
		{"-", Identity{}},
	}
	for _, test := range tests {
		if got := ParseIdentity(test.path); got != test.want {
			t.Errorf("ParseIdentity(%q)\n got %+v\nwant %+v", test.path, got, test.want)
		}
	}
}
