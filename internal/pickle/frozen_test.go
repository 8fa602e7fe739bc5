package pickle

import "testing"

// A frozen memo gives back every entry as it was packed: placeholders
// (KindForeign with their own id) by a bit, anything else, a placeholder
// for another id included, from its packed values; the first chunk's as
// they are once set (Join's memo), and past them frozen.
func TestFrozenMemo(t *testing.T) {
	str := func(n uint32) uint32 { return uint32(KindString)<<payloadBits | n }
	for _, tc := range []struct {
		name  string
		n     int
		entry func(id uint64) uint32
		kept  int // entries of the first chunk that are not placeholders
	}{
		{"trace entries: a dict, a string, a list", 300, func(id uint64) uint32 {
			if id%3 == 1 {
				return str(7)
			}
			return placeholder(id)
		}, 100},
		{"no placeholders", 130, func(id uint64) uint32 { return str(uint32(id)) }, 130},
		{"only placeholders", 65, placeholder, 0},
		{"another id's placeholder", 70, func(id uint64) uint32 { return placeholder(id ^ 1) }, 70},
		{"two chunks", memoChunkLen + 5, func(id uint64) uint32 {
			if id%64 == 63 {
				return placeholder(id)
			}
			return uint32(KindInt)<<payloadBits | uint32(id%1000)
		}, memoChunkLen - memoChunkLen/64},
		{"past the hot chunks", hotLen + memoChunkLen + 5, func(id uint64) uint32 {
			if id%3 == 0 {
				return placeholder(id)
			}
			return uint32(KindInt)<<payloadBits | uint32(id%1000)
		}, memoChunkLen - (memoChunkLen+2)/3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &frozenMemo{n: uint64(tc.n)}
			set := newFrozenMemo(uint64(tc.n))
			for lo := 0; lo < tc.n; lo += memoChunkLen {
				us := make([]uint32, min(memoChunkLen, tc.n-lo))
				for j := range us {
					us[j] = tc.entry(uint64(lo + j))
				}
				// f freezes the first chunk too, to count what it keeps, in
				// runs of uneven lengths, as Join's cross words of bits.
				var z freezer
				z.reset(uint64(lo), len(us), false)
				for i, k := 0, 0; i < len(us); k++ {
					n := min([]int{1, 63, 2, 130, 5, 64}[k%6], len(us)-i)
					z.addRun(us[i : i+n])
					i += n
				}
				f.chunks = append(f.chunks, frozenChunk{})
				z.set(f)
				freezeChunk(set, lo/memoChunkLen, us)
				clear(us) // set keeps no reference to it
			}
			for i := range uint64(tc.n) {
				if got, want := f.at(i), tc.entry(i); got != want {
					t.Fatalf("entry %d: %#x, want %#x", i, got, want)
				}
				if got, want := set.at(i), tc.entry(i); got != want {
					t.Fatalf("entry %d, set: %#x, want %#x", i, got, want)
				}
			}
			if len(set.hot) != min(tc.n, hotLen) {
				t.Errorf("%d entries hot, want the first chunks' %d", len(set.hot), min(tc.n, hotLen))
			}
			if last := set.chunks[len(set.chunks)-1]; tc.n > hotLen && len(last.foreign) == 0 {
				t.Errorf("the chunk past the hot ones is not frozen")
			}
			if got := len(f.chunks[0].values); got != tc.kept {
				t.Errorf("first chunk keeps %d values, want %d", got, tc.kept)
			}
		})
	}
}

// freezeChunk freezes us, the entries of chunk c, into f in one run (us
// may be reused after).
func freezeChunk(f *frozenMemo, c int, us []uint32) {
	var z freezer
	z.reset(uint64(c)*memoChunkLen, len(us), c < hotChunks)
	z.addRun(us)
	z.set(f)
}
