package units

import (
	"flag"
	"io"
	"testing"
)

func TestBytesString(t *testing.T) {
	tests := []struct {
		in   Bytes
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{-1023, "-1023 B"},
		{KiB, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{20 * MiB, "20.00 MiB"},
		{MiB - 1, "1.00 MiB"}, // 1023.999 KiB must not print as "1024.00 KiB"
		{6496138035, "6.05 GiB"},
		{-64 * MiB, "-64.00 MiB"},
		{1000 * GiB, "1000.00 GiB"},
		{3 * TiB, "3.00 TiB"},
		{EiB, "1.00 EiB"},
		{-1 << 63, "-8.00 EiB"},
		{1<<63 - 1, "8.00 EiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

func TestBytesIsFlagValue(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var limit Bytes
	fs.Var(&limit, "max-growth", "")
	if err := fs.Parse([]string{"--max-growth", "64MiB"}); err != nil {
		t.Fatal(err)
	}
	if limit != 64*MiB {
		t.Errorf("--max-growth 64MiB set %d, want %d", limit, 64*MiB)
	}
	if err := fs.Parse([]string{"--max-growth", "lots"}); err == nil {
		t.Error("--max-growth lots: no error")
	}
}
