package pools

import (
	"math"
	"testing"
)

// TestFloorsGarbledLoad: a stats line with an absurd running-request count
// is one more load level, not memory for two billion of them.
func TestFloorsGarbledLoad(t *testing.T) {
	var ss []Sample
	for i := range 400 {
		s := Sample{At: float64(i), Running: int32(1 + i%3), Used: int64(1000 * (1 + i%3)), Exact: true}
		if i == 200 {
			s.Running = math.MaxInt32
		}
		ss = append(ss, s)
	}
	f := Floors(ss)
	if len(f.Points) != floorWindows || f.Level != 1 || f.LevelLoad != 1000 {
		t.Errorf("%d floors at %d requests, level load %d; want %d, 1, 1000", len(f.Points), f.Level, f.LevelLoad, floorWindows)
	}
	for _, p := range f.Points {
		if p.Used != 1000 {
			t.Errorf("floor %+v, want 1000 at 1 request", p)
		}
	}
}
