//go:build unix

package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestRunForwardsSignals sends signals to the test process while Run
// supervises a shell that traps them, as a user's kill or Ctrl-C reaches
// vramscope record.
func TestRunForwardsSignals(t *testing.T) {
	tests := []struct {
		name string
		sigs []syscall.Signal
		code int
		// terminal says whether a SIGINT came from the terminal.
		terminal bool
		// child is the shell script; it writes $VRAMSCOPE_OUT/ready once its
		// traps are set.
		child string
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, 42, false, `trap 'exit 42' TERM`},
		{"SIGHUP", []syscall.Signal{syscall.SIGHUP}, 43, false, `trap 'exit 43' HUP`},
		// An interrupt sent to vramscope alone is passed on.
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, 44, false, `trap 'exit 44' INT`},
		// One typed at the terminal has reached the command already: not
		// twice (the SIGTERM then ends the test).
		{"SIGINT from the terminal", []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}, 46, true,
			`trap 'exit 44' INT; trap 'exit 46' TERM`},
		// The dump signal goes to the processes that announced a handler
		// (as the hook does), not to the command.
		{"SIGUSR1 to the announced process", []syscall.Signal{syscall.SIGUSR1}, 45, false,
			`trap 'exit 45' USR1; mkdir -p "$VRAMSCOPE_OUT/.vramscope"; echo ` + strconv.Itoa(int(syscall.SIGUSR1)) +
				` > "$VRAMSCOPE_OUT/.vramscope/signal-$$"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := fromTerminal
			fromTerminal = func() bool { return tt.terminal }
			t.Cleanup(func() { fromTerminal = saved })
			s := DefaultSettings()
			s.Out = filepath.Join(t.TempDir(), "out")
			ready := filepath.Join(s.Out, "ready")
			script := tt.child + `; touch "$VRAMSCOPE_OUT/ready"; while :; do sleep 0.05; done`
			type result struct {
				st  Status
				err error
			}
			done := make(chan result, 1)
			go func() {
				st, err := Run([]string{"sh", "-c", script}, s, nil, &bytes.Buffer{}, &bytes.Buffer{})
				done <- result{st, err}
			}()
			waitFor(t, ready)
			for _, sig := range tt.sigs {
				if err := syscall.Kill(os.Getpid(), sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			select {
			case r := <-done:
				if r.err != nil || r.st.Code != tt.code {
					t.Errorf("status %+v, %v; want code %d", r.st, r.err, tt.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the child did not get the signal")
			}
		})
	}
}

func TestAnnounced(t *testing.T) {
	out := t.TempDir()
	dir := filepath.Join(out, ".vramscope")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	usr1 := strconv.Itoa(int(syscall.SIGUSR1)) + "\n"
	files := map[string]string{
		"signal-" + strconv.Itoa(self): usr1, // this process
		"signal-999999999":             usr1, // gone
		"signal-1":                     strconv.Itoa(int(syscall.SIGUSR2)),
		"signal-x":                     usr1,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := announced(out, syscall.SIGUSR1); len(got) != 1 || got[0] != self {
		t.Errorf("announced = %v, want [%d]", got, self)
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	for range 200 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}
