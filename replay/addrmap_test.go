package replay

import (
	"math/rand/v2"
	"testing"
)

// TestAddrMap checks addrMap against a Go map over random inserts,
// overwrites and deletes, with keys clustered (to make long probe runs and
// wrap-arounds) and the reserved empty key among them.
func TestAddrMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := newAddrMap[int32]()
	want := map[uint64]int32{}
	key := func() uint64 {
		switch rng.IntN(10) {
		case 0:
			return emptyKey
		case 1:
			return 0
		}
		return 0x7f0000000000 + uint64(rng.IntN(3000))*512
	}
	for op := range 200000 {
		k := key()
		switch rng.IntN(3) {
		case 0, 1:
			old, replaced := m.set(k, int32(op))
			if w, wok := want[k]; old != w || replaced != wok {
				t.Fatalf("op %d: set(%#x) replaced %d, %v; want %d, %v", op, k, old, replaced, w, wok)
			}
			want[k] = int32(op)
		case 2:
			v, ok := m.remove(k)
			if w, wok := want[k]; v != w || ok != wok {
				t.Fatalf("op %d: remove(%#x) = %d, %v; want %d, %v", op, k, v, ok, w, wok)
			}
			delete(want, k)
		}
		if op%1000 == 0 || op > 199000 {
			if m.len() != len(want) {
				t.Fatalf("op %d: len %d, want %d", op, m.len(), len(want))
			}
			for k, v := range want {
				if got, ok := m.get(k); !ok || got != v {
					t.Fatalf("op %d: get(%#x) = %d, %v; want %d", op, k, got, ok, v)
				}
			}
			n := 0
			for k, v := range m.all() {
				if want[k] != v {
					t.Fatalf("op %d: all yields %#x=%d; want %d", op, k, v, want[k])
				}
				n++
			}
			if n != len(want) {
				t.Fatalf("op %d: all yields %d keys, want %d", op, n, len(want))
			}
		}
	}
	if _, ok := m.get(0x1234); ok {
		t.Fatal("get of an absent key succeeded")
	}
}
