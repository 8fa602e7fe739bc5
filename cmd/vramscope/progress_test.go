package main

import "testing"

// The mark is the furthest byte told, at most the file's size: a split
// decode that failed tells more than the file holds.
func TestProgressMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		told []int64
		want int64
	}{
		{"parts in any order", []int64{30, 10, 70, 50}, 70},
		{"the whole file", []int64{40, 100}, 100},
		{"a failed split, past the size", []int64{60, 141, 120}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &progressMark{size: 100}
			for _, off := range tc.told {
				p.reached(off)
			}
			if got := p.highWater(); got != tc.want {
				t.Errorf("high water %d, want %d", got, tc.want)
			}
		})
	}
}
