package main

import (
	"encoding/json"
	"io"
)

// writeJSON prints v as the indented JSON every --json report uses.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
