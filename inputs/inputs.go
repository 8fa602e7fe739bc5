// Package inputs turns command-line arguments into the snapshot files they
// name (and, for analyze, the memory logs and text dumps), in the order a
// user expects to read them.
//
//  1. Expand resolves each argument: a file is taken as named, "-" is
//     standard input, and a directory (walked recursively) or a glob
//     contributes only the files whose first bytes say "snapshot" (KindOf),
//     so dump folders with logs and CSVs mixed in just work. ExpandWithLogs
//     also keeps the memory-log CSVs, memory_summary dumps and OOM messages
//     that memlog.Detect recognizes.
//  2. Each input carries the Identity its path implies (tag, rank, pid, step,
//     dump time), parsed from names like step2/actor_rank0_pid746.pickle.
//  3. The files one argument expands to are ordered by step, then dump time,
//     then rank; arguments keep their command-line order.
//  4. Open returns a Reader that counts bytes, for progress bars and for
//     saying where in a file decoding stopped.
package inputs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Stdin is the argument that names standard input.
const Stdin = "-"

// Input is one file to read.
type Input struct {
	// Path is the file's path as given or found under a directory argument,
	// or Stdin.
	Path string
	// Kind is what the file holds. Standard input and pipes are taken as
	// Snapshot unread; an explicitly named file that cannot be opened is
	// Other, and reading it reports why.
	Kind Kind
	Identity
}

// String names the input in messages.
func (in Input) String() string {
	if in.Path == Stdin {
		return "stdin"
	}
	return in.Path
}

// Expand resolves args into snapshot inputs. Files named explicitly are kept
// whatever they hold, so that reading them reports the real problem; files
// found in directories or through globs are kept only if KindOf says
// Snapshot, and the others are returned in skipped. An argument that names
// nothing, a glob that matches nothing or a directory without snapshots is
// an error.
func Expand(args []string) (inputs []Input, skipped []string, err error) {
	return expand(args, false)
}

// ExpandWithLogs is Expand for commands that also read memory logs and text
// dumps: directories and globs contribute the files of kind MemoryLog and
// Text too, and only one with none of the three is an error.
func ExpandWithLogs(args []string) (inputs []Input, skipped []string, err error) {
	return expand(args, true)
}

// expand is Expand, and ExpandWithLogs when texts is set.
func expand(args []string, texts bool) (inputs []Input, skipped []string, err error) {
	seen := map[string]bool{}
	add := func(in Input) {
		if !seen[in.Path] {
			seen[in.Path] = true
			inputs = append(inputs, in)
		}
	}
	for _, arg := range args {
		if arg == Stdin {
			if seen[Stdin] {
				return nil, nil, errors.New("standard input (-) named more than once")
			}
			add(Input{Path: Stdin, Kind: Snapshot})
			continue
		}
		group, skip, err := expandArg(arg, texts)
		if err != nil {
			return nil, nil, err
		}
		skipped = append(skipped, skip...)
		slices.SortStableFunc(group, compareInputs)
		for _, in := range group {
			add(in)
		}
	}
	return inputs, skipped, nil
}

// expandArg resolves one argument other than Stdin.
func expandArg(arg string, texts bool) (found []Input, skipped []string, err error) {
	wanted := "snapshots"
	if texts {
		wanted = "snapshots, memory logs or memory_summary/OOM text"
	}
	info, statErr := os.Stat(arg)
	if statErr != nil {
		if !errors.Is(statErr, fs.ErrNotExist) || !strings.ContainsAny(arg, "*?[") {
			return nil, nil, statErr
		}
		// Not a file: a glob the shell did not expand (quoted, or Windows).
		matches, err := filepath.Glob(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("bad pattern %q: %w", arg, err)
		}
		if len(matches) == 0 {
			return nil, nil, fmt.Errorf("%s: no files match", arg)
		}
		for _, m := range matches {
			f, s, err := collect(m, texts)
			if err != nil {
				return nil, nil, err
			}
			found, skipped = append(found, f...), append(skipped, s...)
		}
		if len(found) == 0 {
			return nil, nil, fmt.Errorf("%s: no %s among the matching files (%d)", arg, wanted, len(skipped))
		}
		return found, skipped, nil
	}
	if !info.IsDir() {
		// A pipe (<(zcat run.pickle.gz)) can be read only once, by the
		// decoder; a file that cannot be classified is kept as Other.
		kind := Snapshot
		if info.Mode().IsRegular() {
			kind, _ = classify(arg, texts)
		}
		return []Input{{Path: arg, Kind: kind, Identity: ParseIdentity(arg)}}, nil, nil
	}
	found, skipped, err = collect(arg, texts)
	if err != nil {
		return nil, nil, err
	}
	if len(found) == 0 {
		return nil, nil, fmt.Errorf("%s: no %s in this directory (other files: %d)", arg, wanted, len(skipped))
	}
	return found, skipped, nil
}

// collect returns the snapshots at path, a file or a directory walked
// recursively, and the memory logs and text dumps when texts is set.
// Hidden files and folders (.git, .ipynb_checkpoints) are not entered.
func collect(root string, texts bool) (found []Input, skipped []string, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		hidden := path != root && strings.HasPrefix(d.Name(), ".")
		if d.IsDir() {
			if hidden {
				return filepath.SkipDir
			}
			return nil
		}
		if hidden {
			return nil
		}
		info, err := os.Stat(path) // follows symlinks, unlike d.Type()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		kind, err := classify(path, texts)
		if err != nil {
			return fmt.Errorf("classifying %s: %w", path, err)
		}
		if kind == Other {
			skipped = append(skipped, path)
			return nil
		}
		found = append(found, Input{Path: path, Kind: kind, Identity: ParseIdentity(path)})
		return nil
	})
	return found, skipped, err
}

// classify is the kind of the regular file at path: Snapshot or Other, or
// also MemoryLog or Text when texts is set.
func classify(path string, texts bool) (Kind, error) {
	kind, err := KindOfFile(path)
	if err != nil || kind == Snapshot || !texts {
		return kind, err
	}
	return kindOfText(path)
}

// compareInputs orders by step, then dump time, then rank and pid, then
// path. Inputs that have a field sort before inputs that lack it.
func compareInputs(a, b Input) int {
	if c := CompareOptional(a.HasStep, b.HasStep, a.Step, b.Step); c != 0 {
		return c
	}
	if c := CompareOptional(a.HasTime, b.HasTime, a.Time.UnixNano(), b.Time.UnixNano()); c != 0 {
		return c
	}
	if c := CompareOptional(a.HasRank, b.HasRank, a.Rank, b.Rank); c != 0 {
		return c
	}
	if c := CompareOptional(a.HasPID, b.HasPID, a.PID, b.PID); c != 0 {
		return c
	}
	return cmp.Compare(a.Path, b.Path)
}

// CompareOptional orders two values that may be absent (a step, a rank
// not every name carries): present values by cmp.Compare, before absent
// ones. analyze orders processes and snapshots by the same rule.
func CompareOptional[T cmp.Ordered](hasA, hasB bool, a, b T) int {
	switch {
	case hasA && hasB:
		return cmp.Compare(a, b)
	case hasA:
		return -1
	case hasB:
		return 1
	}
	return 0
}

// Reader reads one input and counts the bytes it has delivered.
type Reader struct {
	r      io.Reader
	file   *os.File // the input's file, if a regular one
	closer io.Closer
	size   int64
	n      int64
}

// Open opens the input for reading. Stdin is read through a file where it
// can be (SpoolStdin), from its start each time it is opened, and Close
// leaves that open; otherwise it is a stream, which only one Reader reads.
func (in Input) Open() (*Reader, error) {
	if in.Path == Stdin {
		SpoolStdin(nil)
		stdin.mu.Lock()
		defer stdin.mu.Unlock()
		return stdin.src.reader()
	}
	f, err := os.Open(in.Path)
	if err != nil {
		return nil, err
	}
	r := &Reader{r: f, closer: f, size: -1}
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
		r.file, r.size = f, info.Size()
	}
	return r, nil
}

func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}

// File returns the input's file when it is a regular one, which may be
// read at any offset (or mapped).
func (r *Reader) File() (*os.File, bool) { return r.file, r.file != nil }

// Size is the input's length in bytes, or -1 when unknown: a stream, as
// standard input is where it could not be copied into a file.
func (r *Reader) Size() int64 { return r.size }

// BytesRead is how many bytes Read has returned so far.
func (r *Reader) BytesRead() int64 { return r.n }

// Close closes the underlying file.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}
