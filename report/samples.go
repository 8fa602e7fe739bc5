package report

import (
	"path/filepath"
	"strings"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// sample is the live bytes of one stack, resolved to names so that it
// outlives its snapshot.
type sample struct {
	// frames are the user frames, outermost first; a stack without user
	// frames has its site as its only frame.
	frames []string
	site   string
	bytes  int64
}

// stackBytes adds up bytes by stack and resolves each stack once.
type stackBytes struct {
	b     *Builder
	sn    *snapshot.Snapshot
	bytes map[snapshot.StackID]int64
	order []snapshot.StackID
}

func (b *Builder) newStackBytes(sn *snapshot.Snapshot) *stackBytes {
	return &stackBytes{b: b, sn: sn, bytes: map[snapshot.StackID]int64{}}
}

func (s *stackBytes) add(stack snapshot.StackID, n uint64) {
	if _, ok := s.bytes[stack]; !ok {
		s.order = append(s.order, stack)
	}
	s.bytes[stack] += int64(n)
}

func (s *stackBytes) samples() []sample {
	f := s.b.opts.Filter
	out := make([]sample, 0, len(s.order))
	for _, id := range s.order {
		site := f.Site(s.sn, id).String()
		user := f.UserFrames(s.sn, id, 0)
		frames := make([]string, 0, len(user))
		for k := len(user) - 1; k >= 0; k-- {
			frames = append(frames, shortFrame(user[k]))
		}
		if len(frames) == 0 {
			frames = append(frames, site)
		}
		out = append(out, sample{frames: frames, site: site, bytes: s.bytes[id]})
	}
	return out
}

// shortFrame names a frame by function, file base name and line: full
// paths make flame-graph boxes unreadable, and the sites table has them.
func shortFrame(f snapshot.Frame) string {
	f.Filename = filepath.Base(f.Filename)
	return f.String()
}

// samplesAtEnd are the active blocks of device dev in the snapshot itself.
func (b *Builder) samplesAtEnd(sn *snapshot.Snapshot, dev int) []sample {
	sb := b.newStackBytes(sn)
	for k := range sn.Segments {
		seg := &sn.Segments[k]
		if seg.Device != dev {
			continue
		}
		for _, bl := range sn.SegmentBlocks(seg) {
			if bl.State.Active() {
				sb.add(bl.Stack, bl.Size)
			}
		}
	}
	return sb.samples()
}

// samplesAt are the blocks active right after event i of tl.
func (b *Builder) samplesAt(sn *snapshot.Snapshot, tl *replay.Timeline, i int) []sample {
	sb := b.newStackBytes(sn)
	for _, k := range tl.LiveAt(i) {
		a := tl.Allocation(k)
		sb.add(a.Stack, a.Size)
	}
	return sb.samples()
}

// mergeSamples adds up samples with the same site and frames (the same
// stack on several devices).
func mergeSamples(in []sample) []sample {
	index := map[string]int{}
	out := make([]sample, 0, len(in))
	for _, s := range in {
		key := s.site + "\x00" + strings.Join(s.frames, "\x00")
		if k, ok := index[key]; ok {
			out[k].bytes += s.bytes
			continue
		}
		index[key] = len(out)
		out = append(out, s)
	}
	return out
}
