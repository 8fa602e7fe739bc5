package snapshot

import (
	"encoding/binary"
	"unsafe"
)

// New returns an empty snapshot with the reserved string, stream and stack
// ids in place. The decoder builds on it; tests use it to make snapshots by
// hand.
func New() *Snapshot {
	sn := &Snapshot{
		Generation: GenModern,
		Unknown:    map[string]int{},
		strings:    []string{""},
		stackOffs:  []uint32{0, 0, 0}, // NoStack and EmptyStack: no frames
	}
	sn.in.strings = map[string]StringID{"": 0}
	sn.in.frames = map[Frame]FrameID{}
	sn.in.stacks = map[string]StackID{}
	sn.in.streams = map[int64]StreamID{}
	sn.InternStream(0)
	return sn
}

// interner holds the lookup maps behind the Intern methods.
type interner struct {
	strings map[string]StringID
	frames  map[Frame]FrameID
	stacks  map[string]StackID // key: the frame ids' bytes
	streams map[int64]StreamID
	key     []byte
}

// InternString returns the id of s, adding it if new.
func (sn *Snapshot) InternString(s string) StringID {
	if id, ok := sn.in.strings[s]; ok {
		return id
	}
	id := StringID(len(sn.strings))
	sn.strings = append(sn.strings, s)
	sn.in.strings[s] = id
	return id
}

// internBytes is InternString for a byte slice; the map lookup does not
// allocate when b is already known.
func (sn *Snapshot) internBytes(b []byte) StringID {
	if id, ok := sn.in.strings[string(b)]; ok {
		return id
	}
	return sn.InternString(string(b))
}

// InternFrame returns the id of f, adding it if new.
func (sn *Snapshot) InternFrame(f Frame) FrameID {
	if id, ok := sn.in.frames[f]; ok {
		return id
	}
	id := FrameID(len(sn.Frames))
	sn.Frames = append(sn.Frames, f)
	sn.in.frames[f] = id
	return id
}

// InternStack returns the id of the stack with these frames (innermost
// first), adding it if new. An empty slice is EmptyStack.
func (sn *Snapshot) InternStack(frames []FrameID) StackID {
	if len(frames) == 0 {
		return EmptyStack
	}
	k := sn.in.key[:0]
	for _, f := range frames {
		k = binary.LittleEndian.AppendUint32(k, uint32(f))
	}
	sn.in.key = k
	if id, ok := sn.in.stacks[unsafe.String(unsafe.SliceData(k), len(k))]; ok {
		return id
	}
	id := StackID(len(sn.stackOffs) - 1)
	sn.stackFrames = append(sn.stackFrames, frames...)
	sn.stackOffs = append(sn.stackOffs, uint32(len(sn.stackFrames)))
	sn.in.stacks[string(k)] = id
	return id
}

// InternStream returns the id of the raw stream value, adding it if new.
func (sn *Snapshot) InternStream(raw int64) StreamID {
	if id, ok := sn.in.streams[raw]; ok {
		return id
	}
	id := StreamID(len(sn.Streams))
	sn.Streams = append(sn.Streams, raw)
	sn.in.streams[raw] = id
	return id
}
