package snapshot

import (
	"fmt"
	"math"

	"github.com/vramscope/vramscope/internal/pickle"
)

// finish assembles the Snapshot from the decoded top-level value: a dict
// (torch 2.0+) or a bare list of segments (torch <= 1.13).
func (b *builder) finish(top pickle.Value) error {
	b.syncEvents()
	sn := b.sn
	switch top.Kind {
	case vRange, vEmpty:
		sn.Generation = GenLegacyList
		if b.withAddress > 0 {
			sn.Generation = GenSegmentList
		}
		segs, err := b.segmentsOf(top)
		if err != nil {
			return err
		}
		sn.Segments = segs
		return nil
	case vDict:
	default:
		return fmt.Errorf("top level is %s, want a dict or a list of segments", b.describe(top))
	}
	// Blocks carry their address since torch 2.1; a dict without any is a
	// torch 2.0 file (history or not: blocks without allocations in their
	// history, or recorded with history off, have none).
	sn.Generation = GenModern
	if b.blocks > 0 && b.withAddress == 0 || b.sawHistory {
		sn.Generation = GenHistory
	}
	kv := b.dicts[top.N]
	for i := 0; i < len(kv); i += 2 {
		name := b.keyString(kv[i])
		v := kv[i+1]
		var err error
		switch name {
		case "segments":
			sn.Segments, err = b.segmentsOf(v)
		case "device_traces":
			sn.Traces, err = b.tracesOf(v)
		case "external_annotations":
			sn.Annotations, err = b.annotationsOf(v)
		case "allocator_settings":
			sn.Settings, err = b.settingsOf(v)
		default:
			sn.Unknown["top."+name]++
			if sn.Extra == nil {
				sn.Extra = map[string]any{}
			}
			sn.Extra[name] = b.anyOf(v)
		}
		if err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
	}
	return nil
}

// spanOf returns the records of a typed list value; an empty list is fine.
func (b *builder) spanOf(v pickle.Value, elem pickle.Kind, want string) (span, error) {
	switch {
	case v.Kind == vEmpty:
		return span{elem: elem}, nil
	case v.Kind == vRange && b.ranges[v.N].elem == elem:
		return b.ranges[v.N], nil
	}
	return span{}, fmt.Errorf("is %s, want a list of %s", b.describe(v), want)
}

func (b *builder) segmentsOf(v pickle.Value) ([]Segment, error) {
	r, err := b.spanOf(v, vSegment, "segments")
	if err != nil {
		return nil, err
	}
	return append([]Segment(nil), b.segs[r.start:r.start+r.n]...), nil
}

func (b *builder) tracesOf(v pickle.Value) ([]Trace, error) {
	if v.Kind == vEmpty {
		return nil, nil
	}
	var items []pickle.Value
	switch v.Kind {
	case vList:
		items = b.lists[v.N]
	case vRange:
		// A single device's trace written as the list itself is not torch's
		// layout; refuse rather than guess.
		return nil, fmt.Errorf("is a flat list of %s, want one list per device", b.describe(v))
	default:
		return nil, fmt.Errorf("is %s, want a list of per-device lists", b.describe(v))
	}
	traces := make([]Trace, len(items))
	for d, it := range items {
		r, err := b.spanOf(it, vEvent, "trace entries")
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", d, err)
		}
		traces[d] = Trace{arena: &b.events, off: r.start, n: r.n}
	}
	return traces, nil
}

func (b *builder) annotationsOf(v pickle.Value) ([]Annotation, error) {
	r, err := b.spanOf(v, vAnnotation, "annotations")
	if err != nil {
		return nil, err
	}
	out := make([]Annotation, r.n)
	for i, a := range b.anns[r.start : r.start+r.n] {
		out[i] = Annotation{Stage: b.sn.strings[a.stage], Name: b.sn.strings[a.name], Device: a.device, TimeUS: a.timeUS}
	}
	return out, nil
}

func (b *builder) settingsOf(v pickle.Value) (*AllocatorSettings, error) {
	raw, ok := b.anyOf(v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is %s, want a dict", b.describe(v))
	}
	s := &AllocatorSettings{Raw: raw, MaxSplitSize: -1}
	if c, ok := raw["PYTORCH_CUDA_ALLOC_CONF"].(string); ok {
		s.Conf = c
	}
	if m, ok := raw["max_split_size"].(int64); ok {
		s.MaxSplitSize = m
	}
	switch g := raw["garbage_collection_threshold"].(type) {
	case float64:
		s.GarbageCollectionThres = g
	case int64:
		s.GarbageCollectionThres = float64(g)
	}
	if e, ok := raw["expandable_segments"].(bool); ok {
		s.ExpandableSegments = e
	}
	return s, nil
}

// maxGeneric bounds the values one generic conversion may produce. The
// memo lets a 300-byte pickle describe a list of 2**40 shared references
// (x = [y, y], y = [z, z], ...), which a tree conversion would expand.
const maxGeneric = 1 << 20

// anyOf converts a value generically, for settings and unknown additions.
func (b *builder) anyOf(v pickle.Value) any {
	budget := maxGeneric
	return b.toAny(v, 0, &budget)
}

// toAny converts v, spending one unit of budget per value. Typed records
// inside are summarized: they only appear there in files from torch
// versions newer than this code.
func (b *builder) toAny(v pickle.Value, depth int, budget *int) any {
	if depth > 64 {
		return "<nested too deep>"
	}
	if *budget <= 0 {
		return "<truncated>"
	}
	*budget--
	switch v.Kind {
	case pickle.KindNone:
		return nil
	case pickle.KindBool:
		return v.N != 0
	case pickle.KindInt:
		return int64(v.N)
	case pickle.KindUint:
		return v.N
	case pickle.KindFloat:
		return math.Float64frombits(v.N)
	case pickle.KindString, pickle.KindBytes:
		return b.sn.strings[v.N]
	case vList, vTuple:
		items := b.lists[v.N]
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = b.toAny(it, depth+1, budget)
		}
		return out
	case vDict:
		kv := b.dicts[v.N]
		out := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			out[b.genericKey(kv[i], depth+1, budget)] = b.toAny(kv[i+1], depth+1, budget)
		}
		return out
	case vEmpty:
		return []any{}
	case vFrame:
		return b.sn.Frames[v.N].String()
	}
	return "<" + b.describe(v) + ">"
}

// describe names a value's type for error messages.
func (b *builder) describe(v pickle.Value) string {
	switch v.Kind {
	case pickle.KindNone:
		return "None"
	case pickle.KindBool:
		return "a bool"
	case pickle.KindInt, pickle.KindUint:
		return "an int"
	case pickle.KindFloat:
		return "a float"
	case pickle.KindString:
		return "a str"
	case pickle.KindBytes:
		return "bytes"
	case vFrame:
		return "a frame"
	case vStack:
		return "a list of frames"
	case vEvent:
		return "a trace entry"
	case vBlock:
		return "a block"
	case vSegment:
		return "a segment"
	case vAnnotation:
		return "an annotation"
	case vHistory:
		return "a history entry"
	case vRange:
		r := b.ranges[v.N]
		return fmt.Sprintf("a list of %d %ss", r.n, b.describe(pickle.Value{Kind: r.elem})[2:])
	case vEmpty:
		return "an empty list"
	case vList:
		return "a list"
	case vTuple:
		return "a tuple"
	case vDict:
		return "a dict"
	}
	return fmt.Sprintf("kind %d", v.Kind)
}
