package analyze

import (
	"sync"

	"github.com/vramscope/vramscope/callsite"
	"github.com/vramscope/vramscope/diagnose"
	"github.com/vramscope/vramscope/snapshot"
)

// site is a place as findings print it: the frame blamed, or the reason
// there is none, a short stack of user frames, and the origin below the
// callsite where the memory was allocated.
type site struct {
	callsite.Site
	Origin callsite.Origin
	Stack  []diagnose.Frame
	rank   int // of the snapshot the stack is from (Analyzer.Expect)
}

// sites interns callsites across snapshots: digests keep only the key, so
// that a snapshot's frames and stacks can be dropped once it is digested.
// Snapshots are compared by key, which names a line of code, not a stack
// id: ids differ between files.
type sites struct {
	mu    sync.Mutex
	byKey map[string]*site
}

// siteResolver maps one snapshot's stacks to site keys, memoized per stack
// because millions of blocks and events share a few thousand stacks.
type siteResolver struct {
	filter *callsite.Filter
	sn     *snapshot.Snapshot
	all    *sites
	depth  int
	rank   int
	keys   map[snapshot.StackID]string
}

// resolver returns the resolver of sn, whose rank is rank.
func (s *sites) resolver(f *callsite.Filter, sn *snapshot.Snapshot, depth, rank int) *siteResolver {
	return &siteResolver{filter: f, sn: sn, all: s, depth: depth, rank: rank, keys: map[snapshot.StackID]string{}}
}

// key returns the site key of stack id, recording the site the first time
// the snapshot of the lowest rank so far shows it.
func (r *siteResolver) key(id snapshot.StackID) string {
	if k, ok := r.keys[id]; ok {
		return k
	}
	st := r.filter.Site(r.sn, id)
	o := r.filter.Origin(r.sn, id)
	// One user line reached through two library lines is two sites, as in
	// package diagnose's places.
	k := st.Key()
	if o.Below(st) {
		k += "|" + o.Key()
	}
	r.keys[id] = k
	r.all.mu.Lock()
	defer r.all.mu.Unlock()
	if s, ok := r.all.byKey[k]; !ok || r.rank < s.rank {
		r.all.byKey[k] = &site{Site: st, Origin: o, Stack: diagnose.NewStack(r.filter.UserFrames(r.sn, id, r.depth)), rank: r.rank}
	}
	return k
}

func (s *sites) get(key string) *site {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// blame fills a finding's callsite and stack from the site, following the
// Finding contract: no callsite without a user frame, and the reason in
// the evidence instead.
func (st *site) blame(f *diagnose.Finding) {
	f.Stack = st.Stack
	if st.Origin.Below(st.Site) {
		o := diagnose.NewFrame(st.Origin.Frame)
		f.Origin, f.AllocatedVia = &o, diagnose.NewStack(st.Origin.Via)
	}
	if st.Known() {
		fr := diagnose.NewFrame(st.Frame)
		f.Callsite = &fr
		return
	}
	f.Evidence["callsite_reason"] = st.Reason
}

// name is how a title refers to the site: the function, or the reason.
func (st *site) name() string {
	if st.Known() {
		return st.Frame.Name
	}
	return "code without a user frame"
}

// allocatedIn is what a title adds for an origin below the callsite:
// ", allocated in update (cache_utils.py:795)", or "".
func (st *site) allocatedIn() string {
	if !st.Origin.Below(st.Site) {
		return ""
	}
	return ", " + diagnose.AllocatedIn(st.Origin, 0)
}
