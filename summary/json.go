package summary

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/vramscope/vramscope/snapshot"
)

// EventCounts counts trace events by action.
type EventCounts map[snapshot.Action]int

// MarshalJSON writes every known action, zeros included, in torch's
// lifecycle order (alloc, free_requested, free_completed, segment_alloc…),
// so that consumers can read .events.oom without a null check. Unknown
// actions appear as "unknown" only when there were some.
func (c EventCounts) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, a := range snapshot.Actions() {
		if a == snapshot.ActionUnknown && c[a] == 0 {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(a.String()))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(c[a]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalJSON writes the pool key as "pool": [a, b], "stream" and "type"
// ("small" or "large") beside the usage fields.
func (p Pool) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Pool   snapshot.PoolID `json:"pool"`
		Stream int64           `json:"stream"`
		Type   string          `json:"type"`
		Usage
	}{p.ID, p.Stream, p.Type.String(), p.Usage})
}
