package pools

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// vLLM's periodic stats line (vllm-project/vllm vllm/v1/metrics/loggers.py,
// LoggingStatLogger.log, v0.8-v0.11; vllm/engine/metrics.py in V0):
//
//	Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%, Prefix cache hit rate: 82.8%
//	Avg prompt throughput: …, Running: 5 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 4.1%, CPU KV cache usage: 0.0%.   (V0)
//
// "GPU KV cache usage" is 1 - free blocks / total blocks, in percent with one
// decimal; cached blocks no request references sit in the free queue, so a
// healthy pool returns to 0 when idle, like SGLang's #token. The pool size
// is printed once at start (vllm/v1/core/kv_cache_utils.py, from v0.7.3):
// "GPU KV cache size: 2,042,016 tokens".
var (
	vllmUsageKey = []byte("GPU KV cache usage:")
	vllmSizeKey  = []byte("GPU KV cache size:")
)

// parseVLLMStats reads one stats line.
func parseVLLMStats(line []byte) (s Sample, ok bool) {
	usage, ok1 := numberAfter(line, vllmUsageKey, "%")
	running, ok2 := numberAfter(line, []byte("Running:"), "reqs")
	waiting, ok3 := numberAfter(line, []byte("Waiting:"), "reqs")
	if !ok3 {
		waiting, ok3 = numberAfter(line, []byte("Pending:"), "reqs")
	}
	if !ok1 || !ok2 || !ok3 || usage < 0 || usage > 100 {
		return s, false
	}
	if running > math.MaxInt32 || waiting > math.MaxInt32 {
		return s, false
	}
	s.Share = float32(usage / 100)
	s.Running, s.Queued = int32(running), int32(waiting)
	return s, true
}

// numberAfter reads the number after key, which must be followed by unit
// (or the end of a field); commas inside it are thousands separators.
func numberAfter(line, key []byte, unit string) (float64, bool) {
	i := bytes.Index(line, key)
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(line[i+len(key):], " ")
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == '.' || rest[end] == ',') {
		end++
	}
	num := strings.TrimRight(strings.ReplaceAll(string(rest[:end]), ",", ""), ".")
	after := strings.TrimLeft(string(rest[end:]), " ")
	// A number cut by wrapping is followed by neither its unit nor a
	// separator.
	if !strings.HasPrefix(after, unit) {
		return 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	return v, err == nil
}
