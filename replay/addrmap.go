package replay

import "iter"

// addrMap maps addresses to V. It replaces map[uint64]V on the replay's hot
// path, where every block event does several lookups, inserts and deletes
// keyed by address: open addressing with linear probing, a multiplicative
// hash (addresses are multiples of 512, and the product's top bits mix
// them), at most half full, and backward-shift deletion so that no
// tombstones pile up over millions of deletes. Replacing the four Go maps
// with it took replay.Devices on the 996 MB bench file (11.4 M events) from
// 1.45 s to 1.15 s of CPU, and from 360 M to 235 M instructions (callgrind)
// per replay of that file's 26 MB seed.
type addrMap[V any] struct {
	slots []addrSlot[V] // len is a power of two
	shift uint          // 64 - log2(len(slots))
	n     int           // used slots
	// mask is len(slots) - 1, stored rather than computed so that get fits
	// the inliner's budget (seed replay: 156 M -> 149 M instructions).
	mask uint64
	// The key that marks an empty slot cannot be stored in a slot.
	hasEmptyKey bool
	emptyKeyVal V
}

type addrSlot[V any] struct {
	key uint64 // emptyKey: unused
	val V
}

const emptyKey = ^uint64(0)

func newAddrMap[V any]() *addrMap[V] {
	m := &addrMap[V]{}
	m.resize(0)
	return m
}

// resize makes room for n keys and reinserts the present ones.
func (m *addrMap[V]) resize(n int) {
	size, shift := 16, uint(60)
	for size < 2*n {
		size, shift = size*2, shift-1
	}
	old := m.slots
	m.slots, m.shift, m.mask = make([]addrSlot[V], size), shift, uint64(size-1)
	for i := range m.slots {
		m.slots[i].key = emptyKey
	}
	for _, s := range old {
		if s.key != emptyKey {
			m.slots[m.probe(s.key)] = s
		}
	}
}

// home is key's preferred slot: the top bits of a Fibonacci hash. The
// shift is masked because shift < 64 always holds, and saying so spares
// the compiler's shift-overflow fixup on every probe.
func (m *addrMap[V]) home(key uint64) uint64 {
	return (key * 0x9e3779b97f4a7c15) >> (m.shift & 63)
}

// probe returns the slot holding key, or the empty slot where it belongs.
func (m *addrMap[V]) probe(key uint64) uint64 {
	i := m.home(key)
	for {
		k := m.slots[i].key
		if k == key || k == emptyKey {
			return i
		}
		i = (i + 1) & m.mask
	}
}

func (m *addrMap[V]) len() int {
	if m.hasEmptyKey {
		return m.n + 1
	}
	return m.n
}

func (m *addrMap[V]) get(key uint64) (V, bool) {
	if key == emptyKey {
		return m.emptyKeyVal, m.hasEmptyKey
	}
	s := &m.slots[m.probe(key)]
	return s.val, s.key == key
}

// set maps key to v and returns the value it replaces, if any.
func (m *addrMap[V]) set(key uint64, v V) (old V, replaced bool) {
	if key == emptyKey {
		old, replaced = m.emptyKeyVal, m.hasEmptyKey
		m.hasEmptyKey, m.emptyKeyVal = true, v
		return old, replaced
	}
	i := m.probe(key)
	s := &m.slots[i]
	if s.key == key {
		old, s.val = s.val, v
		return old, true
	}
	if 2*(m.n+1) > len(m.slots) {
		m.resize(m.n + 1)
		s = &m.slots[m.probe(key)]
	}
	s.key, s.val = key, v
	m.n++
	return old, false
}

// remove deletes key and returns the value it had: one probe where a get
// and a delete would take two.
func (m *addrMap[V]) remove(key uint64) (V, bool) {
	var zero V
	if key == emptyKey {
		v, ok := m.emptyKeyVal, m.hasEmptyKey
		m.hasEmptyKey, m.emptyKeyVal = false, zero
		return v, ok
	}
	i := m.probe(key)
	if m.slots[i].key != key {
		return zero, false
	}
	v := m.slots[i].val
	m.n--
	// Backward shift: move later entries of the probe run into the hole
	// unless that would put them before their home slot.
	mask := m.mask
	for j := (i + 1) & mask; m.slots[j].key != emptyKey; j = (j + 1) & mask {
		if h := m.home(m.slots[j].key); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i].key = emptyKey
	return v, true
}

// all iterates over the keys and values in no particular order.
func (m *addrMap[V]) all() iter.Seq2[uint64, V] {
	return func(yield func(uint64, V) bool) {
		if m.hasEmptyKey && !yield(emptyKey, m.emptyKeyVal) {
			return
		}
		for _, s := range m.slots {
			if s.key != emptyKey && !yield(s.key, s.val) {
				return
			}
		}
	}
}
