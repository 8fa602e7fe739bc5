package capture

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/internal/testutil"
)

func TestEnviron(t *testing.T) {
	s := DefaultSettings()
	s.Out = "/runs/mem"
	sep := string(os.PathListSeparator)
	tests := []struct {
		name       string
		base       []string
		pythonPath string
		kept       []string
		dropped    []string
	}{
		{name: "no PYTHONPATH", base: []string{"HOME=/root", "PATH=/bin"}, pythonPath: "/tmp/hook",
			kept: []string{"HOME=/root", "PATH=/bin"}},
		{name: "empty PYTHONPATH", base: []string{"PYTHONPATH="}, pythonPath: "/tmp/hook"},
		{name: "PYTHONPATH kept after the hook", base: []string{"PYTHONPATH=/src" + sep + "/lib"},
			pythonPath: "/tmp/hook" + sep + "/src" + sep + "/lib"},
		{name: "an outer run's settings replaced",
			base:       []string{"VRAMSCOPE_OUT=/old", "VRAMSCOPE_TAG=old", "VRAMSCOPE_STEPS=9", "RANK=1"},
			pythonPath: "/tmp/hook", kept: []string{"RANK=1"},
			dropped: []string{"VRAMSCOPE_OUT=/old", "VRAMSCOPE_TAG=old", "VRAMSCOPE_STEPS=9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Environ(tt.base, "/tmp/hook", s)
			var paths []string
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
					paths = append(paths, v)
				}
			}
			if len(paths) != 1 || paths[0] != tt.pythonPath {
				t.Errorf("PYTHONPATH %q, want [%q]", paths, tt.pythonPath)
			}
			for _, kv := range append(tt.kept, s.Env()...) {
				if !slices.Contains(env, kv) {
					t.Errorf("%s missing from %q", kv, env)
				}
			}
			for _, kv := range tt.dropped {
				if slices.Contains(env, kv) {
					t.Errorf("%s inherited", kv)
				}
			}
		})
	}
}

func TestSettingsEnv(t *testing.T) {
	s := Settings{Out: "/o", Tag: "actor", Stacks: "all", MaxEntries: 5000, NoHistory: true, Every: 10,
		Interval: 5 * time.Minute, LogInterval: 1500 * time.Millisecond, NoLog: true, Signal: "USR2",
		NoOOM: true, Final: "never", ModuleNames: true}
	want := []string{"VRAMSCOPE_OUT=/o", "VRAMSCOPE_STACKS=all", "VRAMSCOPE_MAX_ENTRIES=5000",
		"VRAMSCOPE_HISTORY=0", "VRAMSCOPE_STEPS=none", "VRAMSCOPE_EVERY=10", "VRAMSCOPE_INTERVAL=300",
		"VRAMSCOPE_LOG_INTERVAL=1.5", "VRAMSCOPE_LOG=0", "VRAMSCOPE_SIGNAL=USR2", "VRAMSCOPE_OOM=0",
		"VRAMSCOPE_FINAL=never", "VRAMSCOPE_MODULE_NAMES=1", "VRAMSCOPE_TAG=actor"}
	if got := s.Env(); !slices.Equal(got, want) {
		t.Errorf("Env() = %q\nwant %q", got, want)
	}
	d := DefaultSettings()
	d.Out = "/o"
	for _, kv := range []string{"VRAMSCOPE_STEPS=2,3,4", "VRAMSCOPE_HISTORY=1", "VRAMSCOPE_LOG_INTERVAL=0",
		"VRAMSCOPE_SIGNAL=USR1", "VRAMSCOPE_FINAL=auto", "VRAMSCOPE_MAX_ENTRIES=1000000"} {
		if !slices.Contains(d.Env(), kv) {
			t.Errorf("defaults lack %s", kv)
		}
	}
}

func TestSettingsCheck(t *testing.T) {
	ok := DefaultSettings()
	ok.Out = "/o"
	tests := []struct {
		name   string
		change func(*Settings)
		want   string
	}{
		{"defaults", func(*Settings) {}, ""},
		{"no out", func(s *Settings) { s.Out = "" }, "no output folder"},
		{"stacks", func(s *Settings) { s.Stacks = "cpp" }, `stacks "cpp"`},
		{"entries", func(s *Settings) { s.MaxEntries = 0 }, "max-entries 0"},
		{"step 0", func(s *Settings) { s.Steps = []int{0, 2} }, "step 0"},
		{"final", func(s *Settings) { s.Final = "sometimes" }, `final "sometimes"`},
		{"signal", func(s *Settings) { s.Signal = "HUP" }, `signal "HUP"`},
		{"signal none", func(s *Settings) { s.Signal = "none" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.change(&s)
			err := s.Check()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCollect(t *testing.T) {
	out := t.TempDir()
	for _, f := range []string{
		"step2/train_rank0_pid7.pickle",
		"step3/train_rank0_pid7.pickle.gz",
		"step2/.train_rank0_pid7.pickle.7.tmp", // a dump in progress
		"oom/train_rank0_pid7.pickle",
		"oom/train_rank0_pid7_oom.txt",
		"train_rank0_pid7_memory_log.csv",
		".vramscope/signal-7",
		".vramscope/dumps-7.jsonl",
		"notes.json",
	} {
		path := filepath.Join(out, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("1234"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Collect(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{"oom/train_rank0_pid7.pickle", KindSnapshot, 4},
		{"oom/train_rank0_pid7_oom.txt", KindOOMMessage, 4},
		{"step2/train_rank0_pid7.pickle", KindSnapshot, 4},
		{"step3/train_rank0_pid7.pickle.gz", KindSnapshot, 4},
		{"train_rank0_pid7_memory_log.csv", KindMemoryLog, 4},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Collect = %+v\nwant %+v", got, want)
	}
}

// TestSitecustomizeChain runs python3 with the hook written as record
// writes it, ahead of another sitecustomize, and a program that never
// imports torch: the other one still runs, and torch stays unimported.
func TestSitecustomizeChain(t *testing.T) {
	python := testutil.Python(t)
	hookDir, other := t.TempDir(), t.TempDir()
	if err := WriteSitecustomize(hookDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "sitecustomize.py"), []byte("import builtins\nbuiltins.CHAINED = True\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := DefaultSettings()
	s.Out = t.TempDir()
	cmd := exec.Command(python, "-c", `import sys, builtins, vramscope_hook
print(getattr(builtins, "CHAINED", False), "torch" in sys.modules, vramscope_hook.__file__)`)
	cmd.Env = Environ(append(os.Environ(), "PYTHONPATH="+other), hookDir, s)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "True False " + filepath.Join(hookDir, "sitecustomize.py") + "\n"
	if string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		script string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 5", 5, ""},
		{"kill -KILL $$", 137, "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			s := DefaultSettings()
			s.Out = filepath.Join(t.TempDir(), "out")
			st, err := Run([]string{"sh", "-c", tt.script}, s, nil, &bytes.Buffer{}, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if st.Code != tt.code || (st.Signal != 0) != (tt.signal != "") {
				t.Errorf("status %+v, want code %d signal %q", st, tt.code, tt.signal)
			}
		})
	}
}

func TestRunEnvironment(t *testing.T) {
	s := DefaultSettings()
	s.Out = filepath.Join(t.TempDir(), "out")
	var stdout bytes.Buffer
	st, err := Run([]string{"sh", "-c", `echo "$VRAMSCOPE_OUT"; ls "${PYTHONPATH%%:*}"`}, s, nil, &stdout, &bytes.Buffer{})
	if err != nil || st.Code != 0 {
		t.Fatal(st, err)
	}
	if want := s.Out + "\nsitecustomize.py\n"; stdout.String() != want {
		t.Errorf("child saw %q, want %q", stdout.String(), want)
	}
	if info, err := os.Stat(s.Out); err != nil || !info.IsDir() {
		t.Errorf("output folder not created: %v", err)
	}
}

func TestRunNoCommand(t *testing.T) {
	s := DefaultSettings()
	s.Out = t.TempDir()
	if _, err := Run([]string{filepath.Join(t.TempDir(), "missing")}, s, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("a command that does not exist started")
	}
}
