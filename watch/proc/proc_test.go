package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeProc writes one process's files under a temporary proc root.
func fakeProc(t *testing.T, root string, pid int, files map[string]string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stat is a /proc/PID/stat line whose command holds a space and a ')'.
func stat(pid int, start int) string {
	return strconv.Itoa(pid) + " (pt_main) thread) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " + strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	env := strings.Join([]string{"PATH=/usr/bin", "HF_TOKEN=secret", "RANK=3", "LOCAL_RANK=1", "VRAMSCOPE_OUT=/runs/mem", ""}, "\x00")
	fakeProc(t, root, 4242, map[string]string{
		"stat":    stat(4242, 987654),
		"comm":    "pt_main_thread\n",
		"cmdline": "/usr/bin/python3\x00train.py\x00--token\x00hunter2\x00",
		"status":  "Name:\tpt_main_thread\nUid:\t0\t0\t0\t0\n",
		"cgroup":  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1d2c3b4a_5e6f_4a1b_9c8d_0123456789ab.slice/cri-containerd-" + strings.Repeat("ab", 32) + ".scope\n",
		"environ": env,
	})
	r := &Reader{Root: root, Keep: []string{"VRAMSCOPE_OUT"}}
	id, err := r.Read(4242)
	if err != nil {
		t.Fatal(err)
	}
	if id.StartTicks != 987654 || id.Command != "pt_main_thread" || id.Cmdline != "/usr/bin/python3" || id.User != "root" {
		t.Errorf("identity %+v", id)
	}
	if id.Container != "abababababab" || id.Pod != "1d2c3b4a-5e6f-4a1b-9c8d-0123456789ab" {
		t.Errorf("container %q pod %q", id.Container, id.Pod)
	}
	if id.Rank == nil || *id.Rank != 3 || id.LocalRank == nil || *id.LocalRank != 1 {
		t.Errorf("rank %v local rank %v", id.Rank, id.LocalRank)
	}
	// Only the kept variable leaves the package.
	if len(id.Env) != 1 || id.Env["VRAMSCOPE_OUT"] != "/runs/mem" {
		t.Errorf("env %v, want only VRAMSCOPE_OUT", id.Env)
	}
	r.Args = true
	if id, _ := r.Read(4242); id.Cmdline != "/usr/bin/python3 train.py --token hunter2" {
		t.Errorf("with Args: %q", id.Cmdline)
	}
}

func TestRankFromCommandLine(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, 7, map[string]string{
		"stat":    stat(7, 1),
		"cmdline": "python\x00-u\x00train.py\x00--local-rank=2\x00--rank\x005\x00",
	})
	id, err := (&Reader{Root: root}).Read(7)
	if err != nil {
		t.Fatal(err)
	}
	if id.Rank == nil || *id.Rank != 5 || id.LocalRank == nil || *id.LocalRank != 2 {
		t.Errorf("rank %v local rank %v, want 5 and 2", id.Rank, id.LocalRank)
	}
}

func TestGoneAndReused(t *testing.T) {
	root := t.TempDir()
	r := &Reader{Root: root}
	if _, err := r.Read(99); !errors.Is(err, ErrGone) {
		t.Errorf("missing pid: %v, want ErrGone", err)
	}
	fakeProc(t, root, 99, map[string]string{"stat": stat(99, 100)})
	a, _ := r.StartTicks(99)
	fakeProc(t, root, 99, map[string]string{"stat": stat(99, 5000)})
	b, _ := r.StartTicks(99)
	if a == b {
		t.Errorf("a reused pid kept start %d", a)
	}
}

func TestCgroups(t *testing.T) {
	tests := []struct{ cgroup, path, container, pod string }{
		{"0::/system.slice/docker-" + strings.Repeat("0f", 32) + ".scope\n", "/system.slice/docker-" + strings.Repeat("0f", 32) + ".scope", "0f0f0f0f0f0f", ""},
		{"12:memory:/kubepods/burstable/pod1d2c3b4a-5e6f-4a1b-9c8d-0123456789ab/" + strings.Repeat("cd", 32) + "\n3:cpu:/x\n", "/kubepods/burstable/pod1d2c3b4a-5e6f-4a1b-9c8d-0123456789ab/" + strings.Repeat("cd", 32), "cdcdcdcdcdcd", "1d2c3b4a-5e6f-4a1b-9c8d-0123456789ab"},
		{"0::/user.slice/user-1000.slice/session-3.scope\n", "/user.slice/user-1000.slice/session-3.scope", "", ""},
	}
	for _, test := range tests {
		path := cgroupPath([]byte(test.cgroup))
		c, p := containerOf(path)
		if path != test.path || c != test.container || p != test.pod {
			t.Errorf("%q: path %q container %q pod %q", test.cgroup, path, c, p)
		}
	}
}

// This test's own process reads like any other.
func TestReadSelf(t *testing.T) {
	id, err := (&Reader{Root: "/proc"}).Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if id.StartTicks == 0 || !strings.HasPrefix(id.Command, "proc.test") || id.User == "" {
		t.Errorf("self: %+v", id)
	}
}
