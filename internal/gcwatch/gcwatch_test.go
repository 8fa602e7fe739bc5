package gcwatch

import (
	"runtime"
	"testing"
	"time"
)

// f is called after collections while it returns true, in turn, and
// never after it returned false.
func TestEach(t *testing.T) {
	calls := make(chan int, 10)
	n := 0
	Each(func() bool {
		n++
		calls <- n
		return n < 3
	})
	// f re-arms after it returns: a collection that starts before then
	// tells the next one.
	deadline := time.Now().Add(10 * time.Second)
	for want := 1; want <= 3; want++ {
		for got := 0; got == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("no call %d after collections", want)
			}
			runtime.GC()
			select {
			case got = <-calls:
				if got != want {
					t.Fatalf("call %d, want %d", got, want)
				}
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for range 5 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case got := <-calls:
		t.Errorf("call %d after f returned false", got)
	default:
	}
}
