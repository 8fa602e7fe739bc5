package allocator

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// Settings are the allocator options of PYTORCH_CUDA_ALLOC_CONF that change
// which blocks and segments the allocator uses.
type Settings struct {
	MaxSplit            uint64  // max_split_size_mb in bytes; Unlimited when unset
	MaxNonSplitRounding uint64  // max_non_split_rounding_mb: how much larger a cached block an oversize request may take
	GCThreshold         float64 // garbage_collection_threshold; 0 when unset
	Expandable          bool    // expandable_segments
	Divisions           [16]uint64
	LargeSegment        uint64  // large_segment_size_mb (2.11): the large buffer and the large expandable page
	Fraction            float64 // per_process_memory_fraction (2.10); 0 when unset
	Backend             string  // "native" unless backend:cudaMallocAsync
}

// Defaults are the settings of an empty PYTORCH_CUDA_ALLOC_CONF.
func Defaults() Settings {
	return Settings{MaxSplit: Unlimited, MaxNonSplitRounding: LargeBuffer,
		LargeSegment: LargeBuffer, Backend: "native"}
}

// Parse reads a PYTORCH_CUDA_ALLOC_CONF string on top of the defaults.
func Parse(conf string) (Settings, error) {
	s := Defaults()
	for _, kv := range splitTop(conf) {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		if err := s.SetPair(kv); err != nil {
			return s, err
		}
	}
	return s, nil
}

// splitTop splits at the commas outside brackets.
func splitTop(conf string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range conf {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, conf[start:i])
				start = i + 1
			}
		}
	}
	return append(out, conf[start:])
}

// Set applies one key:value pair with the checks torch makes when parsing.
func (s *Settings) Set(key, val string) error {
	wrap := func(err error) error { return fmt.Errorf("allocator setting %s:%s: %w", key, val, err) }
	switch key {
	case "max_split_size_mb", "max_non_split_rounding_mb", "large_segment_size_mb":
		mb, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return wrap(err)
		}
		lo := s.LargeSegment >> 20
		if key == "large_segment_size_mb" {
			lo = MinLargeAlloc>>20 + 1
		}
		if mb < lo {
			return wrap(fmt.Errorf("must be at least %d", lo))
		}
		switch key {
		case "max_split_size_mb":
			s.MaxSplit = mb << 20
		case "max_non_split_rounding_mb":
			s.MaxNonSplitRounding = mb << 20
		default:
			s.LargeSegment = mb << 20
			s.MaxNonSplitRounding = mb << 20
		}
	case "garbage_collection_threshold":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return wrap(err)
		}
		if f <= 0 || f >= 1 {
			return wrap(fmt.Errorf("must be between 0 and 1, exclusive"))
		}
		s.GCThreshold = f
	case "expandable_segments":
		b, err := strconv.ParseBool(val)
		if err != nil {
			return wrap(err)
		}
		s.Expandable = b
	case "roundup_power2_divisions":
		d, err := parseDivisions(val)
		if err != nil {
			return wrap(err)
		}
		s.Divisions = d
	case "per_process_memory_fraction":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return wrap(err)
		}
		if f <= 0 || f > 1 {
			return wrap(fmt.Errorf("must be in (0, 1]"))
		}
		s.Fraction = f
	case "backend":
		s.Backend = val
	case "release_lock_on_cudamalloc", "pinned_use_cuda_host_register", "pinned_num_register_threads",
		"pinned_use_background_threads", "graph_capture_record_stream_reuse", "expandable_segments_handle_type",
		"pinned_reserve_segment_size_mb":
		// no effect on sizes or on which block serves which request
	default:
		return fmt.Errorf("allocator setting %q: unknown key", key)
	}
	return nil
}

// parseDivisions reads roundup_power2_divisions: one number for every
// interval, or a list [MiB:divisions,...,>:divisions] whose first entry
// also fills the intervals below it and whose ">" fills those after the
// last one listed.
func parseDivisions(val string) ([16]uint64, error) {
	var d [16]uint64
	check := func(n uint64) error {
		if n != 0 && n&(n-1) != 0 {
			return fmt.Errorf("divisions %d is not a power of two", n)
		}
		return nil
	}
	if !strings.HasPrefix(val, "[") {
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return d, err
		}
		if err := check(n); err != nil {
			return d, err
		}
		for i := range d {
			d[i] = n
		}
		return d, nil
	}
	body, ok := strings.CutSuffix(strings.TrimPrefix(val, "["), "]")
	if !ok {
		return d, fmt.Errorf("unclosed list")
	}
	last := -1
	for k, item := range strings.Split(body, ",") {
		key, v, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return d, fmt.Errorf("list item %q: want MiB:divisions", item)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return d, fmt.Errorf("list item %q: %w", item, err)
		}
		if err := check(n); err != nil {
			return d, err
		}
		if strings.TrimSpace(key) == ">" {
			for i := last + 1; i < len(d); i++ {
				d[i] = n
			}
			continue
		}
		mb, err := strconv.ParseUint(strings.TrimSpace(key), 10, 64)
		if err != nil || mb == 0 || mb&(mb-1) != 0 {
			return d, fmt.Errorf("list item %q: the interval must be a power of two MiB", item)
		}
		i := min(63-leadingZeros(mb), len(d)-1)
		if k == 0 {
			for j := 0; j < i; j++ {
				d[j] = n
			}
		}
		d[i] = n
		last = i
	}
	return d, nil
}

// FromSnapshot is the settings a snapshot recorded: the fields torch wrote
// (those in force at the dump) over the last parsed configuration string,
// which alone carries max_non_split_rounding_mb, large_segment_size_mb and
// per_process_memory_fraction. Nil settings (before torch 2.3) give the
// defaults.
func FromSnapshot(a *snapshot.AllocatorSettings) (Settings, error) {
	if a == nil {
		return Defaults(), nil
	}
	s, err := Parse(a.Conf)
	if err != nil {
		return s, fmt.Errorf("recorded PYTORCH_CUDA_ALLOC_CONF: %w", err)
	}
	s.MaxSplit = Unlimited
	if a.MaxSplitSize > 0 && a.MaxSplitSize != math.MaxInt64 {
		s.MaxSplit = uint64(a.MaxSplitSize)
	}
	s.GCThreshold = a.GarbageCollectionThres
	s.Expandable = a.ExpandableSegments
	if m, ok := a.Raw["roundup_power2_divisions"].(map[string]any); ok {
		for k, v := range m {
			mb, err := strconv.ParseUint(k, 10, 64)
			if err != nil || mb == 0 {
				continue
			}
			n, _ := v.(int64)
			i := min(63-leadingZeros(mb), len(s.Divisions)-1)
			s.Divisions[i] = uint64(max(n, 0))
		}
	}
	return s, nil
}

// String is the settings as a PYTORCH_CUDA_ALLOC_CONF string, defaults left out.
func (s Settings) String() string {
	var parts []string
	if s.Expandable {
		parts = append(parts, "expandable_segments:True")
	}
	if s.MaxSplit != Unlimited {
		parts = append(parts, fmt.Sprintf("max_split_size_mb:%d", s.MaxSplit>>20))
	}
	if s.GCThreshold > 0 {
		parts = append(parts, "garbage_collection_threshold:"+strconv.FormatFloat(s.GCThreshold, 'g', -1, 64))
	}
	if s.Divisions != ([16]uint64{}) {
		all := true
		for _, d := range s.Divisions {
			all = all && d == s.Divisions[0]
		}
		if all {
			parts = append(parts, fmt.Sprintf("roundup_power2_divisions:%d", s.Divisions[0]))
		} else {
			var items []string
			for i, d := range s.Divisions {
				items = append(items, fmt.Sprintf("%d:%d", 1<<i, d))
			}
			parts = append(parts, "roundup_power2_divisions:["+strings.Join(items, ",")+"]")
		}
	}
	if s.LargeSegment != LargeBuffer {
		parts = append(parts, fmt.Sprintf("large_segment_size_mb:%d", s.LargeSegment>>20))
	}
	if s.MaxNonSplitRounding != s.LargeSegment {
		parts = append(parts, fmt.Sprintf("max_non_split_rounding_mb:%d", s.MaxNonSplitRounding>>20))
	}
	if s.Fraction > 0 {
		parts = append(parts, "per_process_memory_fraction:"+strconv.FormatFloat(s.Fraction, 'g', -1, 64))
	}
	if len(parts) == 0 {
		return "(defaults)"
	}
	return strings.Join(parts, ",")
}

// SetPair applies one KEY:VALUE pair, as --set gives it.
func (s *Settings) SetPair(kv string) error {
	key, val, ok := strings.Cut(kv, ":")
	if !ok {
		return fmt.Errorf("allocator setting %q: want KEY:VALUE", kv)
	}
	return s.Set(strings.TrimSpace(key), strings.TrimSpace(val))
}
