package analyze

import (
	"slices"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/memlog"
)

func TestGroup(t *testing.T) {
	snap := func(path string, endUS int64) *digest {
		return &digest{in: inputs.Input{Path: path, Identity: inputs.ParseIdentity(path)}, endUS: endUS}
	}
	text := func(path string) *textDigest {
		return &textDigest{in: inputs.Input{Path: path, Identity: inputs.ParseIdentity(path)}}
	}
	// oom is a file's OOM messages of one process, as oomDigests splits
	// them; rank and pid come from the messages' log prefixes.
	oom := func(path string, rank, pid *int) *textDigest {
		t := text(path)
		t.ooms = []memlog.OOMMessage{{Rank: rank, PID: pid}}
		t.rank, t.pid = rank, pid
		return t
	}
	tests := []struct {
		name  string
		snaps []*digest
		texts []*textDigest
		want  map[string][]string // process id -> inputs in analysis order
		order []string
	}{
		{name: "rank and pid decide, steps order, logs by identity",
			snaps: []*digest{snap("step10/rollout_rank1_pid2.pickle", 0), snap("step2/rollout_rank1_pid2.pickle", 0),
				snap("step2/actor_rank0_pid1.pickle", 0)},
			texts: []*textDigest{text("rollout_rank1_pid2_memory_log.csv")},
			want: map[string][]string{
				"rank0/pid1": {"step2/actor_rank0_pid1.pickle"},
				"rank1/pid2": {"step2/rollout_rank1_pid2.pickle", "step10/rollout_rank1_pid2.pickle", "rollout_rank1_pid2_memory_log.csv"}},
			order: []string{"rank0/pid1", "rank1/pid2"}},
		{name: "names without identity group by stem; trace end orders them",
			snaps: []*digest{snap("b/snap.pickle", 200), snap("a/snap.pickle", 300), snap("full_run.pickle.gz", 1)},
			want:  map[string][]string{"snap": {"b/snap.pickle", "a/snap.pickle"}, "full_run": {"full_run.pickle.gz"}},
			order: []string{"full_run", "snap"}},
		{name: "a log without identity joins the process its name starts with",
			snaps: []*digest{snap("actor_rank0_pid1.pickle", 0), snap("rollout_rank1_pid2.pickle", 0)},
			texts: []*textDigest{text("rollout_memory_log.csv"), text("other.csv")},
			want: map[string][]string{
				"rank0/pid1": {"actor_rank0_pid1.pickle"},
				"rank1/pid2": {"rollout_rank1_pid2.pickle", "rollout_memory_log.csv"},
				"other":      {"other.csv"}},
			order: []string{"rank0/pid1", "rank1/pid2", "other"}},
		{name: "a text file joins the only process",
			snaps: []*digest{snap("frag_oom.pickle.gz", 0)},
			texts: []*textDigest{text("oom_message.txt")},
			want:  map[string][]string{"frag_oom": {"frag_oom.pickle.gz", "oom_message.txt"}},
			order: []string{"frag_oom"}},
		{name: "the OOM message saved beside the only snapshot joins it",
			snaps: []*digest{snap("frag_oom.pickle.gz", 0)},
			texts: []*textDigest{oom("oom_message.txt", nil, nil)},
			want:  map[string][]string{"frag_oom": {"frag_oom.pickle.gz", "oom_message.txt"}},
			order: []string{"frag_oom"}},
		{name: "files of OOM messages are processes of their own",
			texts: []*textDigest{oom("a.txt", nil, nil), oom("b.txt", nil, nil), oom("x/oom.txt", nil, nil), oom("y/oom.txt", nil, nil)},
			want:  map[string][]string{"a": {"a.txt"}, "b": {"b.txt"}, "oom": {"x/oom.txt"}, "y/oom.txt": {"y/oom.txt"}},
			order: []string{"a", "b", "oom", "y/oom.txt"}},
		{name: "beside two snapshot processes, OOM files join by name or stand alone",
			snaps: []*digest{snap("frag_oom.pickle.gz", 0), snap("other.pickle.gz", 0)},
			texts: []*textDigest{oom("frag_oom_message.txt", nil, nil), oom("one.txt", nil, nil), oom("two.txt", nil, nil)},
			want: map[string][]string{"frag_oom": {"frag_oom.pickle.gz", "frag_oom_message.txt"}, "other": {"other.pickle.gz"},
				"one": {"one.txt"}, "two": {"two.txt"}},
			order: []string{"frag_oom", "one", "other", "two"}},
		{name: "log prefixes split a torchrun log by rank; rank and pid join across files and names",
			snaps: []*digest{snap("actor_rank1_pid77.pickle", 0)},
			texts: []*textDigest{oom("train.log", new(0), nil), oom("train.log", new(1), nil),
				oom("ray.log", new(1), new(77)), oom("ray2.log", new(2), new(78)), oom("ray3.log", new(2), new(78))},
			want: map[string][]string{
				"rank1/pid77": {"actor_rank1_pid77.pickle", "ray.log"},
				"rank2/pid78": {"ray2.log", "ray3.log"},
				"train/rank0": {"train.log"}, "train/rank1": {"train.log"}},
			order: []string{"train/rank0", "rank1/pid77", "train/rank1", "rank2/pid78"}}, // by rank, then pid
	}
	for _, test := range tests {
		gs := group(test.snaps, test.texts)
		var order []string
		for _, g := range gs {
			order = append(order, g.id)
			var got []string
			for _, d := range g.snaps {
				got = append(got, d.in.Path)
			}
			for _, t := range g.texts {
				got = append(got, t.in.Path)
			}
			if !slices.Equal(got, test.want[g.id]) {
				t.Errorf("%s: %s has %q, want %q", test.name, g.id, got, test.want[g.id])
			}
		}
		if !slices.Equal(order, test.order) {
			t.Errorf("%s: processes %q, want %q", test.name, order, test.order)
		}
	}
}

// A snapshot's trace findings get the allocator model's advice on OOMs
// alone where its process has other snapshots (mergeTraceFindings keeps
// no fragmentation finding of theirs), on OOMs and fragmentation where it
// is its process's only one.
func TestAdvisedKinds(t *testing.T) {
	in := func(path string) inputs.Input {
		return inputs.Input{Path: path, Kind: inputs.Snapshot, Identity: inputs.ParseIdentity(path)}
	}
	a := New(Options{})
	ins := []inputs.Input{
		in("run/step2/actor_rank0_pid746.pickle"), in("run/step3/actor_rank0_pid746.pickle"),
		in("run/step2/actor_rank1_pid747.pickle"),
		in("a/snap.pickle"), in("b/snap.pickle"), // one process by stem
		in("solo.pickle"),
		{Path: "run/memory.csv", Kind: inputs.MemoryLog},
		in("solo.pickle"), // named twice: still one snapshot
	}
	a.Expect(ins)
	oomOnly := []diagnose.Kind{diagnose.KindOOM}
	both := []diagnose.Kind{diagnose.KindOOM, diagnose.KindFragmentation}
	for _, tt := range []struct {
		in   inputs.Input
		want []diagnose.Kind
	}{
		{ins[0], oomOnly}, {ins[1], oomOnly}, {ins[2], both}, {ins[3], oomOnly}, {ins[4], oomOnly}, {ins[5], both},
		{in("not/expected.pickle"), both},
	} {
		if got := a.advised(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("%s: advised %v, want %v", tt.in.Path, got, tt.want)
		}
	}
}
