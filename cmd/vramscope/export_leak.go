package main

import (
	"errors"
	"fmt"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/export/pprofout"
)

// atLeak is the --at value for the leaked blocks. pprofout knows only
// moments (end, peak); which blocks leak is diagnose's step analysis,
// which the exporter must not import.
const atLeak = "leak"

// checkAt validates --at before any input is loaded.
func checkAt(at string) error {
	if at == atLeak {
		return nil
	}
	if _, err := pprofout.ParseMoment(at); err != nil {
		return fmt.Errorf("export --at: %w (or leak)", err)
	}
	return nil
}

// errNoLeak is --at leak's error for a snapshot in which steps finds no
// leaking callsite: an empty profile would look like a broken one.
var errNoLeak = errors.New("no callsite leaks in this trace (vramscope steps shows why)")

// pprofBlocks returns the blocks the --pprof profile of l shows at at, and
// the moment's time. For leak they are the blocks of the leaking callsites
// still allocated at the end of each device's trace, so the profile's total
// is the bytes the leaks hold.
func pprofBlocks(l loaded, at string, f *callsite.Filter) ([]pprofout.Block, int64, error) {
	if at != atLeak {
		m, err := pprofout.ParseMoment(at)
		if err != nil {
			return nil, 0, err
		}
		blocks, timeUS := pprofout.Live(l.sn, l.timelines, m)
		return blocks, timeUS, nil
	}
	var blocks []pprofout.Block
	var timeUS int64
	for _, tl := range l.timelines {
		n := tl.Len()
		if n == 0 {
			continue
		}
		r := diagnose.Leak(l.sn, tl, diagnose.DetectSteps(l.sn, tl, f), f)
		blocks = append(blocks, pprofout.Allocations(tl, n-1, r.LeakedAllocations(l.sn, tl, f))...)
		timeUS = max(timeUS, tl.Trace.At(n-1).TimeUS)
	}
	if len(blocks) == 0 {
		return nil, 0, &inputError{msg: fmt.Sprintf("export --at leak: %s: %v", l.in, errNoLeak)}
	}
	return blocks, timeUS, nil
}
