package main

import "testing"

// TestEvidenceText checks that every number under a *_bytes key reads as
// a size, whatever Go type diagnose stored it in, and that fractions are
// short.
func TestEvidenceText(t *testing.T) {
	for _, tc := range []struct {
		key  string
		v    any
		want string
	}{
		// The OOM evidence of public Constructor-Sun/code_location.
		{"device_free_bytes", uint64(95682560), "91.25 MiB"},
		{"request_bytes", uint64(5308694528), "4.94 GiB"},
		{"allocated_bytes", int64(84063158272), "78.29 GiB"},
		{"trapped_bytes", 139386880, "132.93 MiB"},
		{"live_bytes", []int64{79691776, 119537664}, "76.00 MiB, 114.00 MiB"},
		{"segment_sizes_bytes", []uint64{2 << 20, 20 << 20}, "2.00 MiB, 20.00 MiB"},
		{"trace_confirms", map[string]any{"bytes_per_step": int64(39845888), "title": "repeats the outer title"}, "{bytes_per_step 38.00 MiB}"},
		{"steps", []int{2, 3, 4}, "2, 3, 4"},
		{"event", 421, "421"},
		{"step_confidence", 0.9985141158989599, "0.999"},
		{"steadiness", 1.0, "1"},
		{"fraction_limited", false, "false"},
		{"contributing", []string{}, "none"},
		{"contributing", []string{"memory_cap", "peak"}, "memory_cap, peak"},
	} {
		if got := evidenceText(tc.key, tc.v); got != tc.want {
			t.Errorf("evidenceText(%q, %#v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
}
