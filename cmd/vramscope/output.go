package main

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
)

// writeJSON prints v as the indented JSON every --json report uses.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeFile creates path and writes it with write; on failure the partial
// file is removed, so a viewer never opens half a profile, and the error is
// an *outputError.
func writeFile(path string, write func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return &outputError{path: path, err: err}
	}
	err = write(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return &outputError{path: path, err: err}
	}
	return nil
}

// outputError reports an output file that could not be written. Like an
// unreadable input it exits with code 2: the command line was right, the
// file system was not.
type outputError struct {
	path string
	err  error
}

func (e *outputError) Error() string {
	// os errors name the path already; say it once.
	cause := e.err
	if pe, ok := errors.AsType[*fs.PathError](cause); ok && pe.Path == e.path {
		cause = pe.Err
	}
	return "writing " + e.path + ": " + cause.Error()
}

func (e *outputError) Unwrap() error { return e.err }
