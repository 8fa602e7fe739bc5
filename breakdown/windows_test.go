package breakdown

import (
	"testing"

	"github.com/vramscope/vramscope/diagnose"
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
