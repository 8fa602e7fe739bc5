package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/inputs"
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
		Example: `  vramscope stats snapshot/testdata/format/default.pickle
  vramscope stats --json mem_snapshots/`,
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

// stats reads every input named by args and reports each one.
func stats(ctx context.Context, stdout, stderr io.Writer, args []string, asJSON bool) error {
	analyse := func(in inputs.Input) (fileStats, error) {
		sn, err := load(in, stderr, 0)
		if err != nil {
			return fileStats{}, err
		}
		return newFileStats(in, sn), nil
	}
	return perFile(ctx, stdout, stderr, args, asJSON, analyse, writeText)
}
