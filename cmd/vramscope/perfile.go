package main

import (
	"context"
	"fmt"
	"io"

	"github.com/vramscope/vramscope/inputs"
)

// perFile runs a command that reports each snapshot on its own (stats,
// explain, steps). It expands args and analyses each input in turn; an
// input that cannot be read is reported on stderr and the others still
// are, and the returned error then counts the failures. Results are printed
// as they come in text, a blank line apart, or at the end as one
// {"files": [...]} document, which is why T carries its JSON form. Each
// input is analysed under the memory gate's limit (gcLimit).
func perFile[T any](ctx context.Context, stdout, stderr io.Writer, args []string, asJSON bool,
	analyse func(inputs.Input) (T, error), text func(io.Writer, T) error) error {
	ins, err := expandSnapshots(stderr, args)
	if err != nil {
		return err
	}
	all := []T{}
	failed, printed := 0, 0
	gate := newMemoryGate(defaultMaxMemory(), gcLimit)
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			return err
		}
		held := gate.acquire(in)
		r, err := analyse(in)
		gate.release(held)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "vramscope: %s: %v\n", in, err)
			continue
		}
		if asJSON {
			all = append(all, r)
			continue
		}
		if printed > 0 {
			fmt.Fprintln(stdout)
		}
		if err := text(stdout, r); err != nil {
			return err
		}
		printed++
	}
	if asJSON {
		if err := writeJSON(stdout, struct {
			Files []T `json:"files"`
		}{all}); err != nil {
			return err
		}
	}
	return unreadable(failed, len(ins))
}
