package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// expandSnapshots resolves the snapshot arguments of stats, explain, steps
// and export, noting on stderr the files of directories and globs that are
// not snapshots.
func expandSnapshots(stderr io.Writer, args []string) ([]inputs.Input, error) {
	ins, skipped, err := inputs.Expand(args)
	if err != nil {
		return nil, &inputError{msg: err.Error()}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "vramscope: skipped %s (first: %s)\n", units.Plural(len(skipped), "non-snapshot file"), skipped[0])
	}
	readStdin(stderr, ins)
	return ins, nil
}

// readStdin reads standard input ahead if ins holds it, so that a pipe
// is copied into a file (inputs.SpoolStdin) before any load waits on the
// memory gate, which sizes it then; a terminal shows the bytes copied.
func readStdin(stderr io.Writer, ins []inputs.Input) {
	if !slices.ContainsFunc(ins, func(in inputs.Input) bool { return in.Path == inputs.Stdin }) {
		return
	}
	bar := newProgressBar(stderr, inputs.Input{Path: inputs.Stdin}.String(), -1)
	if bar == nil {
		inputs.SpoolStdin(nil)
		return
	}
	defer bar.Clear()
	inputs.SpoolStdin(func(n int64) { bar.Set64(n) })
}

// unreadable is the error of a command that reported every input it could
// read and failed of total could not be; nil when none failed.
func unreadable(failed, total int) error {
	if failed == 0 {
		return nil
	}
	return &inputError{msg: fmt.Sprintf("%d of %d inputs could not be read", failed, total)}
}

// loadDevices loads one input and replays the trace of each device.
func loadDevices(in inputs.Input, stderr io.Writer) (*snapshot.Snapshot, []*replay.Timeline, error) {
	sn, err := load(in, stderr, 0)
	if err != nil {
		return nil, nil, err
	}
	tls, err := replay.Devices(sn)
	if err != nil {
		return nil, nil, fmt.Errorf("replaying the trace: %w", err)
	}
	return sn, tls, nil
}

// sniffBytes is how much of an input is examined before decoding: enough
// for a compressed stream to yield its first decompressed bytes.
const sniffBytes = 64 << 10

// errNotSnapshot is returned for an input with no pickle, gzip or zstd
// header.
var errNotSnapshot = errors.New("not a PyTorch memory snapshot: no pickle, gzip or zstd header")

// notRead is err, said of an input that starts with head, with what to do
// where head says the input is of a kind vramscope does not read
// (inputs.Foreign).
func notRead(err error, head []byte) error {
	if what, do := inputs.Foreign(head); what != "" {
		return fmt.Errorf("%w: it is %s, which vramscope does not read: %s", err, what, do)
	}
	return err
}

// load reads and decodes one input, with a progress bar on stderr for
// large files, on cores goroutines at most (0: every core).
func load(in inputs.Input, stderr io.Writer, cores int) (*snapshot.Snapshot, error) {
	r, err := in.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()

	var src io.Reader = r
	bar := newProgressBar(stderr, in.String(), r.Size())
	if bar != nil {
		defer bar.Clear()
		src = io.TeeReader(r, bar)
	}
	// The prefix is peeked, not consumed (stdin cannot be reopened), so
	// that a CSV or log named by mistake gets a clear message rather than a
	// pickle opcode error. Only a failed decode is blamed on the content:
	// protocol 0 and 1 pickles have no header but decode fine.
	br := bufio.NewReaderSize(src, sniffBytes)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	if len(head) == 0 {
		return nil, errors.New("empty file")
	}
	var sn *snapshot.Snapshot
	read := r.BytesRead
	if f, ok := r.File(); ok {
		// A file is read where the decoder wants it: a big one in place
		// and by one goroutine per core at once (snapshot.ReadFile).
		p := &progressMark{bar: bar, size: r.Size()}
		read = p.highWater
		sn, err = snapshot.ReadFile(f, r.Size(), cores, p.reached)
	} else {
		sn, err = snapshot.Read(br)
	}
	if err != nil {
		// A compressed stream's error already says what it holds.
		if kind, _ := inputs.KindOf(bytes.NewReader(head)); kind != inputs.Snapshot && !snapshot.Compressed(head) {
			return nil, notRead(fmt.Errorf("%w (it starts with %q)", errNotSnapshot, head[:min(len(head), 16)]), head)
		}
		if size := r.Size(); size >= 0 {
			// Tells a truncated copy (all bytes read) from damage inside.
			return nil, fmt.Errorf("%w (stopped after reading %d of %d bytes)", err, read(), size)
		}
		return nil, err
	}
	// The decoder's memo (about 90 MB of 4 MiB chunks on the 996 MB bench
	// file) is garbage now. Without a memory limit the collector's goal
	// would keep its pages resident: returning them to the OS lowered
	// analyze's peak RSS on that file from 1025 MB to 886 MB. Under one
	// (the memory gate's, or GOMEMLIMIT) a collection is enough, and the
	// replay's allocations that follow reuse the pages instead of
	// faulting in fresh ones: analyze's minor faults 176-178 K -> 161-163 K
	// on that file, 61 K -> 48-50 K on a 288 MB one, at the same peak
	// RSS within 1% (2 cores, bench/RESULTS.md).
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.FreeOSMemory()
	} else {
		runtime.GC()
	}
	return sn, nil
}
