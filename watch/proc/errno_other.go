//go:build !unix

package proc

import "errors"

var errESRCH = errors.New("no such process")
