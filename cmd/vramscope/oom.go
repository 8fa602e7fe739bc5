package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/memlog"
)

func newOOMCommand(stdout io.Writer) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   `oom [--json] ["<pasted OOM message>" | --file LOG]`,
		Short: "Explain a CUDA out-of-memory message pasted from a log",
		Long: `Oom reads the "CUDA out of memory" messages of any torch release (the
argument, the file named by --file, or standard input) and explains each:
the allocation that failed, how much reserved memory was trapped in partly
used segments, whether a per-process memory fraction was in force, and what
to change. A snapshot explains more: see vramscope explain.`,
		Example: `  vramscope oom --file train.log
  pbpaste | vramscope oom --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = cmd.InOrStdin()
			switch {
			case len(args) == 1 && file != "":
				return fmt.Errorf("give the message as an argument or with --file, not both")
			case len(args) == 1:
				r = strings.NewReader(args[0])
			case file != "":
				f, err := os.Open(file)
				if err != nil {
					return &inputError{msg: err.Error()}
				}
				defer f.Close()
				r = f
			}
			msgs, err := memlog.ParseOOMMessages(r)
			if err != nil {
				return &inputError{msg: err.Error()}
			}
			if asJSON {
				return writeOOMsJSON(stdout, msgs)
			}
			return writeOOMs(stdout, msgs)
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read the messages from this log file")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"messages":[{"message":{...}, "segment_bytes", "trapped_bytes", "non_pytorch_bytes", "fraction_limited", "explanation"}]}`)
	return cmd
}

// writeOOMsJSON prints each message's explanation, the struct the text
// report reads too, so both say the same.
func writeOOMsJSON(w io.Writer, msgs []memlog.OOMMessage) error {
	reports := make([]*diagnose.MessageReport, len(msgs))
	for i, m := range msgs {
		reports[i] = diagnose.ExplainMessage(m)
	}
	return writeJSON(w, struct {
		Messages []*diagnose.MessageReport `json:"messages"`
	}{reports})
}

// writeOOMs prints each message's numbers and explanation.
func writeOOMs(w io.Writer, msgs []memlog.OOMMessage) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	row := func(label string, v units.Bytes, note string) {
		p("%s\n", strings.TrimRight(fmt.Sprintf("  %-28s%11s  %s", label, v, note), " "))
	}
	for i, m := range msgs {
		r := diagnose.ExplainMessage(m)
		if i > 0 {
			p("\n")
		}
		p("OOM message at line %d (%s wording), GPU %d\n", m.Line, m.Wording, m.Device)
		row("tried to allocate", m.TriedToAllocate, "the segment the allocator asked cudaMalloc for")
		row("total capacity", m.TotalCapacity, "")
		row("free on the GPU", m.Free, "")
		if m.Allowed > 0 {
			row("allowed", m.Allowed, "set_per_process_memory_fraction cap")
		}
		row("allocated by PyTorch", m.Allocated, "")
		if m.PrivatePools > 0 {
			row("  in private pools", m.PrivatePools, "CUDA graphs or MemPools")
		}
		row("reserved but unallocated", m.ReservedUnallocated, "trapped in partly used segments")
		row("reserved", m.Reserved, "")
		if r.NonPyTorch >= 0 {
			row("outside PyTorch", units.Bytes(r.NonPyTorch), "this process's CUDA context and libraries")
		}
		for _, pm := range m.Processes {
			who := "this process"
			if pm.PID != 0 {
				who = fmt.Sprintf("process %d", pm.PID)
			}
			row("in use by "+who, pm.InUse, "")
		}
		if len(m.Missing) > 0 {
			p("  missing from the text: %s\n", strings.Join(m.Missing, ", "))
		}
		p("\n  %s\n", r.Explanation)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
