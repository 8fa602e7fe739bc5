package pprofout

import (
	"github.com/google/pprof/profile"
	"github.com/vramscope/vramscope/snapshot"
)

// Names of the synthetic location of a block without frames.
const (
	beforeRecordingName = "<before recording>"
	noContextName       = "<no stack: context=None>"
	emptyStackName      = "<no stack: frames=[]>"
)

// stacks interns the snapshot's frames into p's locations and functions,
// in order of first use.
type stacks struct {
	sn *snapshot.Snapshot
	p  *profile.Profile
	// mapping marks every location as symbolized, so that pprof does not
	// look for binaries to symbolize Python frames against. Its name is the
	// same in every profile: pprof merges locations only within equal
	// mappings, and -diff_base depends on that merge.
	mapping   *profile.Mapping
	frames    map[snapshot.FrameID]*profile.Location
	synthetic map[string]*profile.Location
	functions map[[2]string]*profile.Function
	byStack   map[snapshot.StackID][]*profile.Location
}

func newStacks(sn *snapshot.Snapshot, p *profile.Profile) *stacks {
	m := &profile.Mapping{ID: 1, File: "pytorch", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p.Mapping = []*profile.Mapping{m}
	return &stacks{
		sn: sn, p: p, mapping: m,
		frames:    map[snapshot.FrameID]*profile.Location{},
		synthetic: map[string]*profile.Location{},
		functions: map[[2]string]*profile.Function{},
		byStack:   map[snapshot.StackID][]*profile.Location{},
	}
}

// locations returns b's call stack, leaf first as both torch and pprof
// order it. A block without frames gets one location named for the reason.
func (s *stacks) locations(b Block) []*profile.Location {
	frames := s.sn.Stack(b.Stack)
	if len(frames) == 0 {
		name := emptyStackName
		switch {
		case b.BeforeRecording:
			name = beforeRecordingName
		case b.Stack == snapshot.NoStack:
			name = noContextName
		}
		return []*profile.Location{s.syntheticLocation(name)}
	}
	if locs, ok := s.byStack[b.Stack]; ok {
		return locs
	}
	locs := make([]*profile.Location, len(frames))
	for i, f := range frames {
		locs[i] = s.frameLocation(f)
	}
	s.byStack[b.Stack] = locs
	return locs
}

func (s *stacks) frameLocation(id snapshot.FrameID) *profile.Location {
	if l, ok := s.frames[id]; ok {
		return l
	}
	f := s.sn.Frames[id]
	line := int64(f.Line)
	if f.Line == snapshot.UnknownLine {
		line = 0 // pprof's "unknown"
	}
	l := s.newLocation(s.function(f.Name, f.Filename), line)
	s.frames[id] = l
	return l
}

func (s *stacks) syntheticLocation(name string) *profile.Location {
	if l, ok := s.synthetic[name]; ok {
		return l
	}
	l := s.newLocation(s.function(name, ""), 0)
	s.synthetic[name] = l
	return l
}

func (s *stacks) newLocation(fn *profile.Function, line int64) *profile.Location {
	l := &profile.Location{
		ID:      uint64(len(s.p.Location) + 1),
		Mapping: s.mapping,
		Line:    []profile.Line{{Function: fn, Line: line}},
	}
	s.p.Location = append(s.p.Location, l)
	return l
}

func (s *stacks) function(name, file string) *profile.Function {
	key := [2]string{name, file}
	if fn, ok := s.functions[key]; ok {
		return fn
	}
	// SystemName stays empty: pprof's front end "demangles" a function
	// whose SystemName equals its Name, and its C++ template simplification
	// turns Python's "<module>" (and our "<before recording>") into "".
	fn := &profile.Function{ID: uint64(len(s.p.Function) + 1), Name: name, Filename: file}
	s.functions[key] = fn
	s.p.Function = append(s.p.Function, fn)
	return fn
}
