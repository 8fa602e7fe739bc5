package pickle

import "testing"

// A finished tail's memo gives up the room after its last entry, in a
// chunk of its own only: the chunks it shares with the head, or the one
// its fork copied but never filled, stay as they are, and every entry
// reads as before.
func TestMemoTrim(t *testing.T) {
	head := func(n uint64) *memo {
		m := new(memo)
		for i := range n {
			if err := m.put(i, Value{Kind: KindInt, N: i}); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	for _, tc := range []struct {
		name      string
		headLen   uint64 // the head's entries, and the fork's start
		own       uint64 // entries the fork adds
		trimmed   bool   // the last chunk's room is cut
		lastChunk int
	}{
		{"entries in the fork's own chunk", memoChunkLen + 5*trimMin, 100, true, 1},
		{"entries in a chunk the fork made", memoChunkLen - 3, 2*trimMin + 3, true, 1},
		{"no entries of its own", memoChunkLen + 5, 0, false, 1},
		{"at a chunk's start, no entries", memoChunkLen, 0, false, 0},
		{"less room than trimMin", memoChunkLen - trimMin/2, trimMin/2 - 10, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := head(tc.headLen)
			f := h.forkLazy(tc.headLen, nil)
			for i := tc.headLen; i < tc.headLen+tc.own; i++ {
				if err := f.put(i, Value{Kind: KindInt, N: 7 * i}); err != nil {
					t.Fatal(err)
				}
			}
			if len(f.chunks)-1 != tc.lastChunk {
				t.Fatalf("%d chunks, want the last to be %d", len(f.chunks), tc.lastChunk)
			}
			last := f.chunks[tc.lastChunk]
			shared := &h.chunks[min(tc.lastChunk, len(h.chunks)-1)][0]
			f.trim()
			c := f.chunks[tc.lastChunk]
			if got := cap(c) == len(c) && cap(last) != len(last); got != tc.trimmed {
				t.Errorf("last chunk %d of %d entries, cap %d -> %d: trimmed %v, want %v", tc.lastChunk, len(c), cap(last), cap(c), got, tc.trimmed)
			}
			if !tc.trimmed && &c[0] != &last[0] {
				t.Errorf("the last chunk was copied")
			}
			if tc.own == 0 && &c[0] != shared && tc.headLen%memoChunkLen == 0 {
				t.Errorf("a chunk shared with the head was copied")
			}
			if want := 4 * int64(cap(c)); tc.trimmed && f.chunkBytes < want {
				t.Errorf("chunkBytes %d, under the last chunk's %d", f.chunkBytes, want)
			}
			for i := range tc.headLen + tc.own {
				want := Value{Kind: KindInt, N: i}
				if i >= tc.headLen {
					want.N = 7 * i
				}
				if v, ok := f.get(i); !ok || v != want {
					t.Fatalf("entry %d: %v, want %v", i, v, want)
				}
			}
		})
	}
}
