package diff

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// Setting is one allocator setting whose values differ, as the snapshots'
// allocator_settings recorded them.
type Setting struct {
	// Key is torch's name (PYTORCH_CUDA_ALLOC_CONF, expandable_segments,
	// max_split_size, roundup_power2_divisions, ...).
	Key string `json:"key"`
	// A and B are the values, written as torch would print them; "" when a
	// side lacks the key.
	A string `json:"a"`
	B string `json:"b"`
}

// notRecorded stands for a snapshot without allocator_settings.
const notRecorded = "(not recorded: torch < 2.3)"

// settingsDiff lists the settings whose recorded values differ, by key.
// A side without allocator_settings differs as a whole from one with them.
func settingsDiff(a, b *snapshot.AllocatorSettings) []Setting {
	switch {
	case a == nil && b == nil:
		return []Setting{}
	case a == nil:
		return []Setting{{Key: "allocator_settings", A: notRecorded, B: "recorded"}}
	case b == nil:
		return []Setting{{Key: "allocator_settings", A: "recorded", B: notRecorded}}
	}
	out := []Setting{}
	keys := slices.Sorted(maps.Keys(a.Raw))
	for k := range b.Raw {
		if _, ok := a.Raw[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, oka := a.Raw[k]
		vb, okb := b.Raw[k]
		sa, sb := "", ""
		if oka {
			sa = settingValue(va)
		}
		if okb {
			sb = settingValue(vb)
		}
		if sa != sb || oka != okb {
			out = append(out, Setting{Key: k, A: sa, B: sb})
		}
	}
	return out
}

// settingValue writes a decoded setting: Python's True/False, -1 for
// "unlimited" as torch writes it, a dict as {k: v, ...} in numeric key
// order (roundup_power2_divisions' keys are sizes in MiB), and strings
// quoted, so that an empty configuration string shows.
func settingValue(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any:
		keys := slices.SortedFunc(maps.Keys(x), func(p, q string) int {
			np, ep := strconv.ParseFloat(p, 64)
			nq, eq := strconv.ParseFloat(q, 64)
			if ep == nil && eq == nil {
				return cmp.Compare(np, nq)
			}
			return cmp.Compare(p, q)
		})
		items := make([]string, len(keys))
		for i, k := range keys {
			items[i] = k + ": " + settingValue(x[k])
		}
		return "{" + strings.Join(items, ", ") + "}"
	case []any:
		items := make([]string, len(x))
		for i, e := range x {
			items[i] = settingValue(e)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return fmt.Sprint(v)
}
