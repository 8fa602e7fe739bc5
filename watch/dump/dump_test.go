package dump

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vramscope/vramscope/watch/proc"
)

// fixture is step's snapshot of the leak_closure scenario under dir: a
// server whose compute_next_token_logits keeps 38 MiB more every step
// (testdata/scenarios/leak_closure.py).
func fixture(dir string, step int) string {
	return filepath.Join(dir, fmt.Sprintf("step%d/server_rank0_pid561.pickle.gz", step))
}

// fakeHook plays the hook in a child process: it has dumped steps 2 and
// 3 already, announces its handler, and on SIGUSR1 dumps "step 4" into a
// time folder, as vramscope_hook.py does.
func fakeHook(out, fixtures string) {
	pid := os.Getpid()
	notes := filepath.Join(out, controlDir, fmt.Sprintf(dumpsNote, pid))
	dump := func(step int, folder, reason string) {
		// The hook's names: step and interval dumps plain, others with
		// their reason.
		name := fmt.Sprintf("server_rank0_pid%d.pickle.gz", pid)
		if reason == signalReason {
			name = fmt.Sprintf("server_rank0_pid%d_signal.pickle.gz", pid)
		}
		b, err := os.ReadFile(fixture(fixtures, step))
		if err != nil {
			panic(err)
		}
		rel := filepath.Join(folder, name)
		os.MkdirAll(filepath.Join(out, folder), 0o755)
		tmp := filepath.Join(out, folder, "."+name+".tmp")
		os.WriteFile(tmp, b, 0o644)
		os.Rename(tmp, filepath.Join(out, rel))
		line, _ := json.Marshal(map[string]any{"path": rel, "reason": reason, "pid": pid})
		f, _ := os.OpenFile(notes, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.Write(append(line, '\n'))
		f.Close()
	}
	os.MkdirAll(filepath.Join(out, controlDir), 0o755)
	dump(2, "step2", "step")
	dump(3, "step3", "step")
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	os.WriteFile(filepath.Join(out, controlDir, fmt.Sprintf(signalNote, pid)), []byte(fmt.Sprintf("%d\n", syscall.SIGUSR1)), 0o644)
	fmt.Println("armed")
	select {
	case <-usr1:
		dump(4, "20261124-081500", "signal")
	case <-time.After(30 * time.Second):
	}
	time.Sleep(30 * time.Second) // stay alive until the parent is done
}

func TestCapture(t *testing.T) {
	if out := os.Getenv("DUMP_FAKE_HOOK"); out != "" {
		fakeHook(out, os.Getenv("DUMP_FIXTURES"))
		return
	}
	fixtures, err := filepath.Abs("../../testdata/scenarios/out/leak_closure")
	if err != nil {
		t.Fatal(err)
	}
	// A relative output folder, resolved through /proc/PID/cwd.
	cmd := exec.Command(os.Args[0], "-test.run=^TestCapture$")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "DUMP_FAKE_HOOK=runs/mem", "DUMP_FIXTURES="+fixtures)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf[:5]) != "armed" {
		t.Fatalf("child: %q %v", buf, err)
	}
	id := proc.Identity{PID: cmd.Process.Pid, Env: map[string]string{EnvOut: "runs/mem"}}
	c := &Capturer{ProcRoot: "/proc", Timeout: 20 * time.Second, MaxInputs: 4}
	res, err := c.Capture(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Dump, "runs/mem/20261124-081500/"+fmt.Sprintf("server_rank0_pid%d_signal.pickle.gz", id.PID)) || len(res.Inputs) != 3 {
		t.Errorf("dump %s inputs %v", res.Dump, res.Inputs)
	}
	top := res.Top()
	if res.Verdict != "leak" || top == nil || top.Callsite.Function != "compute_next_token_logits" || top.Callsite.Line != 78 || top.BytesPerStep != 38<<20 {
		t.Fatalf("verdict %s top %+v", res.Verdict, top)
	}
	t.Logf("captured in %.2f s: %s", res.Seconds, top.Title)
}

func TestNotHooked(t *testing.T) {
	c := &Capturer{ProcRoot: "/proc", Timeout: time.Second}
	if _, err := c.Capture(context.Background(), proc.Identity{PID: os.Getpid()}); err == nil || !strings.Contains(err.Error(), "not running under the vramscope hook") {
		t.Errorf("unhooked: %v", err)
	}
	// Hooked by its environment but without the handler's note: no
	// signal is sent (it would kill the process).
	id := proc.Identity{PID: os.Getpid(), Env: map[string]string{EnvOut: t.TempDir()}}
	if _, err := c.Capture(context.Background(), id); err == nil || !strings.Contains(err.Error(), "not armed") {
		t.Errorf("not armed: %v", err)
	}
	if Hooked(proc.Identity{Env: map[string]string{EnvOut: "x", EnvSignal: "none"}}) {
		t.Error("signal none counts as hooked")
	}
}
