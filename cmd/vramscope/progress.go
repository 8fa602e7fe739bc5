package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMinBytes: smaller files decode in well under a second, where a
// bar would only flicker.
const progressMinBytes = 64 << 20

// newProgressBar returns a bar of bytes read and rate for loading name, or
// nil when stderr is not a terminal (logs, CI, tests) or the file is small.
// size is -1 for a pipe: the bar then shows bytes and rate without a total.
func newProgressBar(stderr io.Writer, name string, size int64) *progressbar.ProgressBar {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	if size >= 0 && size < progressMinBytes {
		return nil
	}
	return progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("loading "+name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionClearOnFinish(),
	)
}

// progressMark follows how far the decoder has read a file of size bytes,
// which it may read at several places at once: the bar shows the furthest
// byte. A split decode tells how much its parts have read in all, which
// passes the size where the head decodes again what a failed part had
// read: a truncated 100 MB copy of the bench file came to 141 MB on 2
// cores. The mark stops at the size.
type progressMark struct {
	bar  *progressbar.ProgressBar // nil: only count
	size int64
	mu   sync.Mutex
	hw   int64
}

// reached notes that a decoder has read up to off.
func (p *progressMark) reached(off int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	off = min(off, p.size)
	if off > p.hw {
		p.hw = off
		if p.bar != nil {
			p.bar.Set64(off)
		}
	}
}

// highWater is the furthest byte read so far.
func (p *progressMark) highWater() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}
