package units

import (
	"errors"
	"math"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want Bytes
	}{
		{"0", 0},
		{"512", 512},
		{"512B", 512},
		{"0 bytes", 0},       // torch's format_size below 1 KiB
		{"1000 bytes", 1000}, // ... and up to 1024
		{"64MiB", 64 * MiB},
		{"64mib", 64 * MiB},
		{"64 MiB", 64 * MiB},
		{"40GiB", 40 * GiB},
		{"40G", 40 * GiB},
		{"1.5 GB", 3 * GiB / 2}, // GB is binary (see unitSizes)
		{"1.5gb", 3 * GiB / 2},
		{"20.00 MiB", 20 * MiB},
		{"6.05 GiB", 6496138035},            // 6.05 × 2^30 = 6496138035.2, rounded
		{"931322.58 GiB", 1000000005781586}, // torch 2.11's absurd-request message
		{"2k", 2 * KiB},
		{"1 TiB", TiB},
		{".5KiB", 512},
		{"  7 MB  ", 7 * MiB},
		{"-64MiB", -64 * MiB},
		{"+1KiB", KiB},
		{"9223372036854775807", 1<<63 - 1},
		{"8191 PiB", 8191 * PiB},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if err != nil {
			t.Errorf("ParseBytes(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParseBytesErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrSyntax, `parsing size "": no number: not a size`},
		{"MiB", ErrSyntax, `parsing size "MiB": no number: not a size`},
		{"-", ErrSyntax, `parsing size "-": no number: not a size`},
		{"12 parsecs", ErrSyntax, `parsing size "12 parsecs": unknown unit "parsecs": not a size`},
		{"1.2.3", ErrSyntax, `parsing size "1.2.3": unknown unit ".3": not a size`},
		{"inf", ErrSyntax, `parsing size "inf": no number: not a size`},
		{"1e9", ErrSyntax, `parsing size "1e9": unknown unit "e9": not a size`},
		{"1,024", ErrSyntax, `parsing size "1,024": unknown unit ",024": not a size`},
		{"9223372036854775808", ErrRange, `parsing size "9223372036854775808": size out of range`},
		{"8192 PiB", ErrRange, `parsing size "8192 PiB": size out of range`},
		{"8.0 EiB", ErrRange, `parsing size "8.0 EiB": size out of range`},
	}
	for _, tt := range tests {
		_, err := ParseBytes(tt.in)
		if !errors.Is(err, tt.want) {
			t.Errorf("ParseBytes(%q) error = %v, want %v", tt.in, err, tt.want)
			continue
		}
		if err.Error() != tt.msg {
			t.Errorf("ParseBytes(%q) error text = %q, want %q", tt.in, err.Error(), tt.msg)
		}
	}
}

// TestStringParsesBack checks that what String prints, ParseBytes reads
// back to within String's rounding (half a unit in the last decimal).
func TestStringParsesBack(t *testing.T) {
	for _, b := range []Bytes{0, 1, 1023, KiB, 6496138035, 3*TiB + 17, -20 * MiB} {
		got, err := ParseBytes(b.String())
		if err != nil {
			t.Fatalf("ParseBytes(%q): %v", b.String(), err)
		}
		if math.Abs(float64(got-b)) > 0.005*math.Abs(float64(b)) {
			t.Errorf("ParseBytes(%q) = %d, want about %d", b.String(), got, b)
		}
	}
}
