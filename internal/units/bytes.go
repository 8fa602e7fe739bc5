// Package units holds the byte quantity that every vramscope package shares,
// with the IEC formatting used in reports and the parsing used for flags and
// for the sizes quoted in PyTorch's own messages.
package units

import (
	"math"
	"strconv"
)

// Bytes is a count of bytes.
//
// It is signed on purpose: analyses subtract sizes (growth between two
// samples, reserved minus allocated, a series that shrinks), and a signed
// type keeps those deltas in the same type as the sizes instead of forcing a
// cast or a silent wrap-around. int64 still spans 8 EiB, far beyond any
// device memory.
type Bytes int64

// IEC units. PyTorch, nvidia-smi and the caching allocator all count in
// powers of 1024, so these are the only multipliers vramscope uses.
const (
	B   Bytes = 1
	KiB       = 1024 * B
	MiB       = 1024 * KiB
	GiB       = 1024 * MiB
	TiB       = 1024 * GiB
	PiB       = 1024 * TiB
	EiB       = 1024 * PiB
)

// iecUnits lists the units String may print, smallest first.
var iecUnits = []struct {
	size Bytes
	name string
}{
	{KiB, "KiB"}, {MiB, "MiB"}, {GiB, "GiB"}, {TiB, "TiB"}, {PiB, "PiB"}, {EiB, "EiB"},
}

// String formats b for people: below 1 KiB as an exact integer ("512 B"),
// otherwise with two decimals in the largest IEC unit that keeps the number
// under 1024 ("6.05 GiB", "20.00 MiB"). Two decimals is the precision of
// PyTorch's own OOM message, so a size quoted from one reads the same in our
// reports. Negative sizes (deltas) keep their sign.
func (b Bytes) String() string {
	if b > -KiB && b < KiB {
		return strconv.FormatInt(int64(b), 10) + " B"
	}
	abs := math.Abs(float64(b))
	i := 0
	for i+1 < len(iecUnits) && abs >= float64(iecUnits[i+1].size) {
		i++
	}
	// Rounding to two decimals can carry into the next unit
	// (1 MiB - 1 B is 1023.999 KiB): print "1.00 MiB", not "1024.00 KiB".
	if v := abs / float64(iecUnits[i].size); math.Round(v*100) >= 1024*100 && i+1 < len(iecUnits) {
		i++
	}
	return strconv.FormatFloat(float64(b)/float64(iecUnits[i].size), 'f', 2, 64) + " " + iecUnits[i].name
}

// Set parses s with ParseBytes, so that a *Bytes can be a command-line flag
// (flag.Var(&limit, "max-growth", ...) accepts "--max-growth 64MiB").
func (b *Bytes) Set(s string) error {
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}
