package snapshot

import (
	"errors"
	"io"
)

// Decode decodes an uncompressed snapshot pickle from r.
func Decode(r io.Reader) (*Snapshot, error) {
	return nil, errors.New("not implemented yet")
}
