package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unitSizes maps every unit spelling ParseBytes accepts, lowercased, to its
// size. The decimal-looking names (KB, MB, GB, ...) are binary on purpose:
// PyTorch users, the memory-log recipes they copy (which divide by 1024*1024
// and label the result "MB") and nvidia-smi all mean 1024-based units, and a
// flag like --max-growth 1GB meaning 10^9 bytes would silently disagree with
// every number vramscope prints.
var unitSizes = map[string]Bytes{
	"": B, "b": B, "byte": B, "bytes": B,
	"k": KiB, "kb": KiB, "kib": KiB,
	"m": MiB, "mb": MiB, "mib": MiB,
	"g": GiB, "gb": GiB, "gib": GiB,
	"t": TiB, "tb": TiB, "tib": TiB,
	"p": PiB, "pb": PiB, "pib": PiB,
	"e": EiB, "eb": EiB, "eib": EiB,
}

// Errors ParseBytes wraps; test for them with errors.Is.
var (
	ErrSyntax = errors.New("not a size")
	ErrRange  = errors.New("size out of range")
)

// ParseBytes parses a size such as "64MiB", "40GiB", "1.5 GB", "512",
// "0 bytes" or "6.05 GiB" (PyTorch's wording). Units are case-insensitive,
// always powers of 1024 (see unitSizes), and may be separated from the
// number by spaces; a bare number is bytes. A fraction is rounded to the
// nearest byte, and a leading sign is allowed because Bytes also holds
// deltas.
func ParseBytes(s string) (Bytes, error) {
	num, unit, err := splitSize(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("parsing size %q: %w", s, err)
	}
	size, ok := unitSizes[strings.ToLower(unit)]
	if !ok {
		return 0, fmt.Errorf("parsing size %q: unknown unit %q: %w", s, unit, ErrSyntax)
	}
	v, err := scale(num, size)
	if err != nil {
		return 0, fmt.Errorf("parsing size %q: %w", s, err)
	}
	return v, nil
}

// splitSize splits "-1.5 GiB" into "-1.5" and "GiB". It checks the number's
// shape itself because strconv.ParseFloat would also take "inf", "1e9" and
// hex floats, none of which is a size anybody writes.
func splitSize(s string) (num, unit string, err error) {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits, dots := 0, 0
	for ; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && dots == 0 {
			dots++
		} else {
			break
		}
	}
	if digits == 0 {
		return "", "", fmt.Errorf("no number: %w", ErrSyntax)
	}
	return s[:i], strings.TrimSpace(s[i:]), nil
}

// scale returns num × size, exactly for integers and rounded to the nearest
// byte for fractions.
func scale(num string, size Bytes) (Bytes, error) {
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/int64(size) || n < math.MinInt64/int64(size) {
			return 0, ErrRange
		}
		return Bytes(n) * size, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, ErrSyntax
	}
	// float64(math.MaxInt64) rounds up to 2^63, so >= is the overflow test.
	v := math.Round(f * float64(size))
	if v >= math.MaxInt64 || v < math.MinInt64 {
		return 0, ErrRange
	}
	return Bytes(v), nil
}
