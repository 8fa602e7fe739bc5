package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/snapshot"
	"github.com/vramscope/vramscope/summary"
)

func newStatsCommand(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--json] FILE...",
		Short: "Print memory totals, pools, trace event counts and caveats of snapshots",
		Long: `Stats prints, per device and per allocator pool, the reserved, allocated,
active and requested bytes of each snapshot (equal to torch.cuda.memory_stats()
at the dump), segment and block counts, internal waste, free memory in partly
used versus fully free segments, the largest free block, trace events by
action with their time span, and the caveats that limit the analysis.

FILE may be a snapshot (.pickle, gzip or zstd, recognized by content), "-" for
standard input, a directory (searched recursively) or a quoted glob.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return stats(cmd.Context(), stdout, stderr, args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"files":[{"path", "devices":[...], "caveats":[...]}]}`)
	return cmd
}

// fileStats is one input's report: where it came from and its summary.
type fileStats struct {
	Path     string     `json:"path"`
	Tag      string     `json:"tag,omitempty"`
	Rank     *int       `json:"rank,omitempty"`
	PID      *int       `json:"pid,omitempty"`
	Step     *int       `json:"step,omitempty"`
	DumpTime *time.Time `json:"dump_time,omitempty"`
	Format   string     `json:"format"`
	Protocol int        `json:"pickle_protocol"`
	*summary.Summary
}

func newFileStats(in inputs.Input, sn *snapshot.Snapshot) fileStats {
	fs := fileStats{
		Path:     in.Path,
		Tag:      in.Tag,
		Format:   sn.Generation.String(),
		Protocol: sn.Protocol,
		Summary:  summary.Of(sn),
	}
	optional := func(has bool, v int) *int {
		if !has {
			return nil
		}
		return &v
	}
	fs.Rank = optional(in.HasRank, in.Rank)
	fs.PID = optional(in.HasPID, in.PID)
	fs.Step = optional(in.HasStep, in.Step)
	if in.HasTime {
		fs.DumpTime = &in.Time
	}
	return fs
}

// stats reads every input named by args and reports each one. An input
// that cannot be read is reported on stderr and the others still are; the
// returned error then says how many failed.
func stats(ctx context.Context, stdout, stderr io.Writer, args []string, asJSON bool) error {
	ins, skipped, err := inputs.Expand(args)
	if err != nil {
		return &inputError{msg: err.Error()}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "vramscope: skipped %s (first: %s)\n", units.Plural(len(skipped), "non-snapshot file"), skipped[0])
	}

	all := []fileStats{}
	failed, printed := 0, 0
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			return err
		}
		sn, err := load(in, stderr)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "vramscope: %s: %v\n", in, err)
			continue
		}
		fs := newFileStats(in, sn)
		if asJSON {
			all = append(all, fs)
			continue
		}
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		if err := writeText(stdout, fs); err != nil {
			return err
		}
		printed++
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Files []fileStats `json:"files"`
		}{all}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &inputError{msg: fmt.Sprintf("%d of %d inputs could not be read", failed, len(ins))}
	}
	return nil
}

// sniffBytes is how much of an input is examined before decoding: enough
// for a compressed stream to yield its first decompressed bytes.
const sniffBytes = 64 << 10

// errNotSnapshot is returned for an input with no pickle, gzip or zstd
// header.
var errNotSnapshot = errors.New("not a PyTorch memory snapshot: no pickle, gzip or zstd header")

// load reads and decodes one input, with a progress bar on stderr for
// large files.
func load(in inputs.Input, stderr io.Writer) (*snapshot.Snapshot, error) {
	r, err := in.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()

	var src io.Reader = r
	if bar := newProgressBar(stderr, in.String(), r.Size()); bar != nil {
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
	sn, err := snapshot.Read(br)
	if err != nil {
		if kind, _ := inputs.KindOf(bytes.NewReader(head)); kind != inputs.Snapshot {
			return nil, fmt.Errorf("%w (it starts with %q)", errNotSnapshot, head[:min(len(head), 16)])
		}
		if size := r.Size(); size >= 0 {
			// Tells a truncated copy (all bytes read) from damage inside.
			return nil, fmt.Errorf("%w (stopped after reading %d of %d bytes)", err, r.BytesRead(), size)
		}
		return nil, err
	}
	return sn, nil
}
