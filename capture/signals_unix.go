//go:build unix

package capture

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals vramscope catches while the command runs.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// hookSignal is the signal a Settings.Signal name stands for.
func hookSignal(name string) (syscall.Signal, bool) {
	switch strings.TrimPrefix(strings.ToUpper(name), "SIG") {
	case "USR1":
		return syscall.SIGUSR1, true
	case "USR2":
		return syscall.SIGUSR2, true
	}
	return 0, false
}

// forwarder hands the signals vramscope receives to the command.
type forwarder struct {
	sigs  chan os.Signal
	procs chan *os.Process
	done  chan struct{}
}

// forwardSignals starts catching signals. Until the command has started
// they are held; then:
//
//   - The hook's dump signal (SIGUSR1) goes to each process whose hook
//     announced a handler for it (OUT/.vramscope/signal-PID), not to the
//     command: a launcher such as torchrun would die of it.
//   - SIGINT goes to the command unless it came from the terminal, which
//     has sent it to the command already (same foreground process group):
//     a second one would interrupt the program's own cleanup and the
//     hook's final dump.
//   - SIGTERM, SIGHUP, SIGQUIT and the other user signal go to the command.
//
// vramscope itself keeps running until the command exits, so that it can
// report what was dumped.
func forwardSignals(s Settings, stderr io.Writer) *forwarder {
	fw := &forwarder{sigs: make(chan os.Signal, 8), procs: make(chan *os.Process, 1), done: make(chan struct{})}
	signal.Notify(fw.sigs, forwarded...)
	dumpSig, hasDump := hookSignal(s.Signal)
	go func() {
		var proc *os.Process
		var held []os.Signal
		for {
			select {
			case <-fw.done:
				return
			case proc = <-fw.procs:
				for _, sig := range held {
					fw.forward(proc, sig, s.Out, dumpSig, hasDump, stderr)
				}
				held = nil
			case sig := <-fw.sigs:
				if proc == nil {
					held = append(held, sig)
					continue
				}
				fw.forward(proc, sig, s.Out, dumpSig, hasDump, stderr)
			}
		}
	}()
	return fw
}

func (fw *forwarder) forward(proc *os.Process, sig os.Signal, out string, dumpSig syscall.Signal, hasDump bool, stderr io.Writer) {
	switch {
	case hasDump && sig == dumpSig:
		pids := announced(out, dumpSig)
		for _, pid := range pids {
			_ = syscall.Kill(pid, dumpSig)
		}
		fmt.Fprintf(stderr, "vramscope: %v: asked %d process(es) to dump a snapshot\n", sig, len(pids))
	case sig == syscall.SIGINT && fromTerminal():
	default:
		_ = proc.Signal(sig)
	}
}

// started gives the forwarder the command's process.
func (fw *forwarder) started(p *os.Process) { fw.procs <- p }

// stop stops catching signals; their default actions apply again.
func (fw *forwarder) stop() {
	signal.Stop(fw.sigs)
	close(fw.done)
}

// announced lists the processes whose hook handles sig, from the files
// OUT/.vramscope/signal-PID that hold the signal's number.
func announced(out string, sig syscall.Signal) []int {
	matches, _ := filepath.Glob(filepath.Join(out, ".vramscope", "signal-*"))
	var pids []int
	for _, m := range matches {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m), "signal-"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(int(sig)) {
			continue
		}
		// A process that has exited takes no signal; its pid may be reused.
		if syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// fromTerminal reports whether a SIGINT was most likely typed at the
// terminal: vramscope's process group is the foreground group of the
// terminal on its standard input, which the command shares, so the
// terminal signalled both. A variable, for tests.
var fromTerminal = func() bool {
	pgrp, err := unix.IoctlGetInt(int(os.Stdin.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
