package breakdown

import (
	"path/filepath"
	"testing"

	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/internal/testutil"
)

// A windowCursor answers as inWindow does for ascending events, whether
// it is asked about every event or skips some: across a window's start
// and end, adjacent windows, an empty one, and none at all.
func TestWindowCursor(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []diagnose.Window
	}{
		{"none", nil},
		{"one", []diagnose.Window{{First: 3, End: 7}}},
		{"adjacent", []diagnose.Window{{First: 0, End: 2}, {First: 2, End: 5}, {First: 9, End: 12}}},
		{"empty and gaps", []diagnose.Window{{First: 1, End: 1}, {First: 4, End: 6}, {First: 8, End: 20}}},
	} {
		for _, step := range []int{1, 2, 3, 5} {
			c := windowCursor{ws: tc.ws}
			for i := 0; i < 25; i += step {
				if got, want := c.holds(i), inWindow(tc.ws, i) >= 0; got != want {
					t.Errorf("%s, every %d events: event %d held %v, want %v", tc.name, step, i, got, want)
				}
			}
		}
	}
}

// On the training snapshots recorded on the H200 (testdata/breakdown,
// torch's optimizer steps and zero_grad calls as annotations) the
// cursors hold the events inWindow holds, every event asked in turn as
// the scan asks them.
func TestWindowCursorRecorded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		optim, zero int // windows torch annotated
	}{
		{"fsdp_train", 3, 3},
		{"llama_train", 3, 3},
		{"mlp_adamw", 4, 4},
	} {
		sn := testutil.Snapshot(t, filepath.Join("..", "testdata", "breakdown", "out", "h200-20261202", tc.name+".pickle.gz"))
		dev := sn.Devices()[0]
		ev := ReadEvents(sn, dev, sn.Traces[dev], Options{})
		if len(ev.optim) != tc.optim || len(ev.zero) != tc.zero {
			t.Fatalf("%s: %d optimizer and %d zero_grad windows, want %d and %d", tc.name, len(ev.optim), len(ev.zero), tc.optim, tc.zero)
		}
		for _, ws := range [][]diagnose.Window{ev.optim, ev.zero} {
			c, held := windowCursor{ws: ws}, 0
			for i := range sn.Traces[dev].Len() {
				got, want := c.holds(i), inWindow(ws, i) >= 0
				if got != want {
					t.Fatalf("%s: event %d held %v, want %v", tc.name, i, got, want)
				}
				if got {
					held++
				}
			}
			if held == 0 {
				t.Errorf("%s: no event in its windows %v", tc.name, ws)
			}
		}
	}
}
