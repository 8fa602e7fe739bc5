package memlog

import (
	"errors"
	"fmt"
)

// ErrUnrecognized is wrapped by every reader's error when the input is not
// the reader's format at all, so a caller can try the next format (as pprof's
// legacy parsers do) and tell "wrong reader" from "broken file".
var ErrUnrecognized = errors.New("unrecognized format")

// SyntaxError describes one line of a memory log that could not be used. It
// is a warning, not a failure: the reader records it and continues.
type SyntaxError struct {
	File string // as given to the reader; may be empty
	Line int    // 1-based line where the bad record starts
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}
