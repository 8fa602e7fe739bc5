package memlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/units"
)

// size parses a size as the OOM message prints it; the expectations below
// then read like the messages they come from.
func size(s string) units.Bytes {
	b, err := units.ParseBytes(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseOOMMessages(t *testing.T) {
	tests := []struct {
		file string
		want []OOMMessage // Text is checked by TestOOMMessageText
	}{
		{"torch1.2-cached.txt", []OOMMessage{{
			Line: 7, Wording: LegacyWording,
			TriedToAllocate: size("64.00 MiB"), Device: 1,
			TotalCapacity: size("10.92 GiB"), Free: size("30.56 MiB"),
			Allocated: size("9.87 GiB"), Reserved: size("10.12 GiB"),
			ReservedUnallocated: size("10.12 GiB") - size("9.87 GiB"),
		}}},
		{"torch2.0-legacy.txt", []OOMMessage{{
			Line: 8, Wording: LegacyWording,
			TriedToAllocate: size("1.53 GiB"), Device: 3,
			TotalCapacity: size("39.59 GiB"), Free: size("1.02 GiB"),
			Allocated: size("35.12 GiB"), Reserved: size("36.80 GiB"),
			ReservedUnallocated: size("36.80 GiB") - size("35.12 GiB"),
		}}},
		{"torch2.0-allowed.txt", []OOMMessage{{
			Line: 1, Wording: LegacyWording,
			TriedToAllocate: size("512.00 MiB"), Device: 0,
			TotalCapacity: size("23.65 GiB"), Free: size("11.62 GiB"), Allowed: size("11.82 GiB"),
			Allocated: size("10.94 GiB"), Reserved: size("11.25 GiB"),
			ReservedUnallocated: size("11.25 GiB") - size("10.94 GiB"),
		}}},
		{"torch2.1-capacty.txt", []OOMMessage{{
			Line: 4, Wording: CapactyWording,
			TriedToAllocate: size("256.00 MiB"), Device: 2,
			TotalCapacity: size("79.15 GiB"), Free: size("176.62 MiB"),
			Processes: []ProcessMemory{{PID: 2154, InUse: size("78.97 GiB")}},
			Allocated: size("76.12 GiB"), ReservedUnallocated: size("2.21 GiB"),
			Reserved: size("76.12 GiB") + size("2.21 GiB"),
		}}},
		{"torch2.11-wrapped.txt", []OOMMessage{{
			Line: 3, Wording: CurrentWording,
			TriedToAllocate: size("931322.58 GiB"), Device: 0,
			TotalCapacity: size("139.80 GiB"), Free: size("138.84 GiB"),
			Processes: []ProcessMemory{{PID: 0, InUse: size("970.00 MiB")}},
			Allocated: size("193.50 MiB"), ReservedUnallocated: size("30.50 MiB"),
			Reserved: size("224.00 MiB"),
		}, {
			Line: 10, Wording: CurrentWording,
			TriedToAllocate: size("100.00 MiB"), Device: 0,
			TotalCapacity: size("139.80 GiB"), Free: size("137.35 GiB"), Allowed: size("2.00 GiB"),
			Processes: []ProcessMemory{{PID: 0, InUse: size("2.44 GiB")}},
			Allocated: size("1.93 GiB"), ReservedUnallocated: 0, Reserved: size("1.93 GiB"),
		}}},
		{"processes.txt", []OOMMessage{{
			Line: 3, Wording: CurrentWording,
			TriedToAllocate: size("2.00 GiB"), Device: 1,
			TotalCapacity: size("47.54 GiB"), Free: size("1.06 GiB"),
			Processes: []ProcessMemory{
				{PID: 31337, InUse: size("12.25 GiB")},
				{PID: 0, InUse: size("30.11 GiB")},
				{PID: 40961, InUse: size("4.00 GiB")},
			},
			Allocated: size("27.40 GiB"), ReservedUnallocated: size("1.95 GiB"),
			Reserved: size("27.40 GiB") + size("1.95 GiB"),
		}}},
		{"truncated.txt", []OOMMessage{{
			Line: 1, Wording: CurrentWording,
			TriedToAllocate: size("14.00 MiB"), Device: 0,
			TotalCapacity: size("22.30 GiB"), Free: size("4.69 MiB"),
			Processes:    []ProcessMemory{{PID: 860120, InUse: size("22.29 GiB")}},
			Allocated:    size("21.92 GiB"),
			PrivatePools: size("22.00 MiB"),
			Reserved:     size("21.92 GiB"),
			Missing:      []string{"reserved but unallocated"},
		}}},
		// The three messages of seed 002 (an SGLang pull request), verbatim
		// with the tracebacks and prose around them.
		{"seed002.txt", []OOMMessage{{
			Line: 17, Wording: CurrentWording,
			TriedToAllocate: size("6.05 GiB"), Device: 0,
			TotalCapacity: size("79.10 GiB"), Free: size("5.94 GiB"),
			Processes:    []ProcessMemory{{PID: 428408, InUse: size("73.15 GiB")}},
			Allocated:    size("65.99 GiB"),
			PrivatePools: size("80.15 MiB"), ReservedUnallocated: size("4.45 GiB"),
			Reserved: size("65.99 GiB") + size("4.45 GiB"),
		}, {
			Line: 30, Wording: CurrentWording,
			TriedToAllocate: size("7.28 GiB"), Device: 0,
			TotalCapacity: size("79.10 GiB"), Free: size("7.18 GiB"),
			Processes: []ProcessMemory{
				{PID: 214835, InUse: size("71.90 GiB")},
				{PID: 214837, InUse: size("14.00 MiB")},
			},
			Allocated: size("69.32 GiB"), ReservedUnallocated: size("126.72 MiB"),
			Reserved: size("69.32 GiB") + size("126.72 MiB"),
		}, {
			Line: 45, Wording: CurrentWording,
			TriedToAllocate: size("2.56 GiB"), Device: 0,
			TotalCapacity: size("139.81 GiB"), Free: size("2.22 GiB"),
			Processes:    []ProcessMemory{{PID: 0, InUse: size("137.59 GiB")}},
			Allocated:    size("134.28 GiB"),
			PrivatePools: size("210.00 MiB"), ReservedUnallocated: size("2.39 GiB"),
			Reserved: size("134.28 GiB") + size("2.39 GiB"),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "oom", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseOOMMessages(f)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].Text = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestOOMMessageText checks that a wrapped message comes back on one line
// and stops before torch's advice.
func TestOOMMessageText(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "oom", "torch2.11-wrapped.txt"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ParseOOMMessages(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	const want = "CUDA out of memory. Tried to allocate 931322.58 GiB. GPU 0 has a total capacity of 139.80 GiB " +
		"of which 138.84 GiB is free. Including non-PyTorch memory, this process has 970.00 MiB memory " +
		"in use. Of the allocated memory 193.50 MiB is allocated by PyTorch, and 30.50 MiB is reserved by " +
		"PyTorch but unallocated."
	if msgs[0].Text != want {
		t.Errorf("Text = %q\nwant   %q", msgs[0].Text, want)
	}
}

func TestParseOOMMessagesInline(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want OOMMessage
	}{
		{
			name: "ROCm build says HIP",
			in:   "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.00 GiB. GPU 5 has a total capacity of 191.98 GiB of which 1.20 GiB is free. Of the allocated memory 180.00 GiB is allocated by PyTorch, and 8.00 GiB is reserved by PyTorch but unallocated.",
			want: OOMMessage{
				Line: 1, Wording: CurrentWording,
				TriedToAllocate: 3 * units.GiB, Device: 5,
				TotalCapacity: size("191.98 GiB"), Free: size("1.20 GiB"),
				Allocated: 180 * units.GiB, ReservedUnallocated: 8 * units.GiB, Reserved: 188 * units.GiB,
			},
		},
		{
			name: "wrapped between a number and its unit, CRLF",
			in:   "CUDA out of memory. Tried to allocate 20.00\r\nMiB. GPU 0 has a total capacity of 7.79 GiB of which 512\r\nbytes is free. Of the allocated memory 7.01 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.\r\n",
			want: OOMMessage{
				Line: 1, Wording: CurrentWording,
				TriedToAllocate: 20 * units.MiB, Device: 0,
				TotalCapacity: size("7.79 GiB"), Free: 512,
				Allocated: size("7.01 GiB"), Reserved: size("7.01 GiB"),
			},
		},
		{
			name: "legacy rounding puts reserved below allocated",
			in:   "CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 4.00 GiB total capacity; 1.00 GiB already allocated; 0 bytes free; 1023.99 MiB reserved in total by PyTorch)",
			want: OOMMessage{
				Line: 1, Wording: LegacyWording,
				TriedToAllocate: 2 * units.MiB, Device: 0,
				TotalCapacity: 4 * units.GiB, Allocated: units.GiB,
				Reserved: size("1023.99 MiB"), ReservedUnallocated: 0,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOOMMessages(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got[0].Text = ""
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseOOMMessagesUnrecognized(t *testing.T) {
	for _, in := range []string{
		"",
		"RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
		"CUDA out of memory. Tried to allocate lots.",
		"|  PyTorch CUDA memory summary, device ID 0  |",
	} {
		_, err := ParseOOMMessages(strings.NewReader(in))
		if !errors.Is(err, ErrUnrecognized) {
			t.Errorf("ParseOOMMessages(%q) error = %v, want ErrUnrecognized", in, err)
		}
	}
}

func TestParseOOMMessagesRangeError(t *testing.T) {
	in := "\n\nCUDA out of memory. Tried to allocate 99999999999.00 GiB. GPU 0 has a total capacity of 1.00 GiB of which 0 bytes is free."
	_, err := ParseOOMMessages(strings.NewReader(in))
	if err == nil || errors.Is(err, ErrUnrecognized) || !strings.HasPrefix(err.Error(), "OOM message at line 3: ") {
		t.Errorf("error = %v, want a line-3 range error", err)
	}
}

func TestWordingString(t *testing.T) {
	for w, want := range map[Wording]string{
		LegacyWording: "torch <= 2.0", CapactyWording: "torch 2.1-2.2", CurrentWording: "torch >= 2.3", 7: "Wording(7)",
	} {
		if got := w.String(); got != want {
			t.Errorf("Wording(%d).String() = %q, want %q", w, got, want)
		}
	}
}
