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
		Long: `Oom reads the out-of-memory messages of any torch release (the argument,
the file named by --file, or standard input): the caching allocator's
"CUDA out of memory", the cudaMallocAsync backend's, and the errors raised
outside PyTorch's allocators (CUDA calls, cuBLAS, NCCL). For each it shows
every fact the message states, the cause those facts decide (README,
"Causes of an OOM") and what to change. A snapshot explains more: see
vramscope explain.`,
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
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"messages":[{"message":{...}, "this_process_bytes", "other_processes", "outside_process_bytes", ..., "cause", "contributing", "because", "explanation"}]}`)
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

// writeOOMs prints each message's facts, the cause they decide and the
// explanation. A fact the message does not state has no row.
func writeOOMs(w io.Writer, msgs []memlog.OOMMessage) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	row := func(label string, v *units.Bytes, note string) {
		if v != nil {
			p("%s\n", strings.TrimRight(fmt.Sprintf("  %-28s%11s  %s", label, *v, note), " "))
		}
	}
	bytesOf := func(v *int64) *units.Bytes {
		if v == nil {
			return nil
		}
		return new(units.Bytes(*v))
	}
	for i, m := range msgs {
		r := diagnose.ExplainMessage(m)
		if i > 0 {
			p("\n")
		}
		p("%s\n", oomHeading(m))
		row("tried to allocate", m.TriedToAllocate, "the segment the allocator asked for, not the tensor")
		row("total capacity", m.TotalCapacity, "")
		row("free on the GPU", m.Free, "")
		row("allowed", m.Allowed, "set_per_process_memory_fraction cap")
		row("allocated by PyTorch", m.Allocated, "")
		row("  in private pools", m.PrivatePools, "CUDA graphs or MemPools")
		row("reserved but unallocated", m.ReservedUnallocated, "trapped in partly used segments")
		row("reserved", m.Reserved, "")
		thisNote := ""
		if r.ThisProcessPID != nil {
			thisNote = fmt.Sprintf("NVML's process %d: its usage is just above the reserve", *r.ThisProcessPID)
		}
		row("in use by this process", bytesOf(r.ThisProcessBytes), thisNote)
		row("  outside PyTorch", bytesOf(r.NonPyTorchBytes), "CUDA context and libraries")
		for _, pm := range r.OtherProcesses {
			row(fmt.Sprintf("in use by process %d", pm.PID), &pm.InUse, "")
		}
		row("outside this process", bytesOf(r.OutsideProcessBytes), "capacity - free - this process")
		if r.RequestExceedsDevice != nil && *r.RequestExceedsDevice {
			p("  the request is larger than the GPU\n")
		}
		if r.FreeAboveRequest != nil && *r.FreeAboveRequest {
			p("  the GPU reported more free memory than the request\n")
		}
		if len(m.Missing) > 0 {
			p("  missing from the text: %s\n", strings.Join(m.Missing, ", "))
		}
		p("  cause: %s\n", r.Cause)
		if len(r.Contributing) > 0 {
			p("  contributing: %s\n", joinCauses(r.Contributing))
		}
		p("\n  %s\n", r.Explanation)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// oomHeading names the message: where it is, who raised it, on which GPU.
func oomHeading(m memlog.OOMMessage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OOM message at line %d", m.Line)
	if len(m.Also) > 0 {
		fmt.Fprintf(&b, " (again at %s)", joinInts(m.Also))
	}
	switch {
	case m.Wording != memlog.NoWording:
		fmt.Fprintf(&b, " (%s wording)", m.Wording)
	case m.Library != "":
		fmt.Fprintf(&b, " (%s)", m.Library)
	default:
		fmt.Fprintf(&b, " (%s)", m.Source)
	}
	if m.Rank != nil {
		fmt.Fprintf(&b, ", rank %d", *m.Rank)
	}
	if m.PID != nil {
		fmt.Fprintf(&b, ", pid %d", *m.PID)
	}
	if m.Device != nil {
		fmt.Fprintf(&b, ", GPU %d", *m.Device)
	}
	return b.String()
}

func joinCauses(cs []diagnose.Cause) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
