//go:build !unix

package capture

import (
	"io"
	"os"
	"os/signal"
)

// hookSignal: there is no dump signal where there are no user signals.
func hookSignal(name string) (int, bool) { return 0, false }

// forwarder keeps vramscope alive through a Ctrl-C, which the console
// delivers to the command as well.
type forwarder struct{ sigs chan os.Signal }

func forwardSignals(s Settings, stderr io.Writer) *forwarder {
	fw := &forwarder{sigs: make(chan os.Signal, 1)}
	signal.Notify(fw.sigs, os.Interrupt)
	return fw
}

func (fw *forwarder) started(p *os.Process) {}

func (fw *forwarder) stop() { signal.Stop(fw.sigs) }
