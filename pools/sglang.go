package pools

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// SGLang's scheduler prints, every decode_log_interval decode steps and at
// every prefill (sgl-project/sglang python/sglang/srt/managers/scheduler.py,
// log_prefill_stats / log_decode_stats, v0.4.x; from v0.4.6 in
// scheduler_metrics_mixin.py, same fields through v0.5.x):
//
//	Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0
//	Decode batch. #running-req: 1, #token: 41, token usage: 0.00, gen throughput (token/s): 6.81, #queue-req: 0
//
// "#token" is max_total_num_tokens - (token_to_kv_pool_allocator.available_size()
// + tree_cache.evictable_size()): evictable prefix cache is not counted, so a
// healthy pool returns to zero when nothing runs. "token usage" is the same
// as a fraction, printed with two decimals. Later releases put a comma after
// "batch", an index ("Prefill batch [10],"), a trailing ", " and optional
// fields (cache hit rate, cuda graph, accept len, input throughput); hybrid
// models print "#full token"/"full token usage". Field order is not relied on.
var (
	prefillKey = []byte("Prefill batch")
	decodeKey  = []byte("Decode batch")
)

// parseSGLangStats reads a Prefill or Decode batch line; ok is false when a
// field it needs is missing or garbled (a line cut by wrapping).
func parseSGLangStats(line []byte) (s Sample, ok bool) {
	i := bytes.Index(line, decodeKey)
	prefill := i < 0
	if prefill {
		if i = bytes.Index(line, prefillKey); i < 0 {
			return s, false
		}
	}
	body := line[i+len(decodeKey):]
	// The first field starts with '#' in every release; what comes
	// before it ("." / "," / " [10]," / "(mixed #running-req: 3). ") is
	// punctuation that changed between releases.
	first := []byte("#running-req")
	if prefill {
		first = []byte("#new-seq")
	}
	j := bytes.Index(body, first)
	if j < 0 {
		return s, false
	}
	var have struct{ running, queued, used bool }
	for field := range bytes.SplitSeq(body[j:], []byte(",")) {
		key, val, found := bytes.Cut(field, []byte(":"))
		if !found {
			if len(bytes.TrimSpace(field)) == 0 {
				continue // the trailing ", "
			}
			return s, false
		}
		var buf [32]byte
		k := squash(key, buf[:0])
		v := string(trimValue(val))
		var err error
		switch string(k) {
		case "#running-req":
			s.Running, err = atoi32(v)
			have.running = true
		case "#queue-req":
			s.Queued, err = atoi32(v)
			have.queued = true
		case "#new-seq":
			s.Admitted, err = atoi32(v)
		case "#token", "#fulltoken":
			s.Used, err = strconv.ParseInt(v, 10, 64)
			s.Exact, have.used = true, true
		case "tokenusage", "fulltokenusage":
			var f float64
			f, err = strconv.ParseFloat(v, 32)
			s.Share = float32(f)
			have.used = true
		}
		if err != nil {
			return s, false
		}
	}
	return s, have.running && have.queued && have.used
}

// trimValue drops the blanks around a field's value and the '.' or '%'
// after it.
func trimValue(b []byte) []byte {
	b = bytes.TrimSpace(b)
	for len(b) > 0 && (b[len(b)-1] == '.' || b[len(b)-1] == '%') {
		b = b[:len(b)-1]
	}
	return b
}

// atoi32 reads a count of requests.
func atoi32(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err
}

// squash drops the blanks from a field name, so that a name split by
// wrapping ("token usa" / "ge") reads the same once the lines are joined.
// It appends to out, which a caller keeps on its stack.
func squash(b, out []byte) []byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			out = append(out, c)
		}
	}
	return out
}

// SGLang's idle check (Scheduler.check_memory, called when nothing runs
// or waits; scheduler.py in v0.4.x, scheduler_runtime_checker_mixin.py in
// v0.5.x) raises or warns:
//
//	token_to_kv_pool_allocator memory leak detected! available_size=A, protected_size=P, self.max_total_num_tokens=T
//	self.token_to_kv_pool_allocator.available_size()=X
//	self.tree_cache.evictable_size()=Y                        (v0.4: A = X + Y)
//	token_to_kv_pool_allocator memory leak detected! self.max_total_num_tokens=T, available_size=A, evictable_size=E, protected_size=P   (v0.5.3+)
//	req_to_token_pool memory leak detected!available_size=3756, total_size=3757
var (
	kvLeakKey   = []byte("token_to_kv_pool_allocator memory leak detected!")
	slotLeakKey = []byte("req_to_token_pool memory leak detected!")
	assignment  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.()]*)\s*=\s*(-?\d+)`)
)

// parseIdleCheck reads one idle-check message, its continuation lines
// joined to it.
func parseIdleCheck(text []byte) (c IdleCheck, ok bool) {
	i := bytes.Index(text, kvLeakKey)
	c.Pool = "token_to_kv_pool"
	if i < 0 {
		if i = bytes.Index(text, slotLeakKey); i < 0 {
			return c, false
		}
		c.Pool = "req_to_token_pool"
	}
	vals := map[string]int64{}
	for _, m := range assignment.FindAllSubmatch(text[i:], -1) {
		n, err := strconv.ParseInt(string(m[2]), 10, 64)
		if err != nil {
			return c, false
		}
		key := string(m[1])
		switch {
		case strings.Contains(key, "allocator.available_size"):
			key = "allocator_available"
		case strings.Contains(key, "evictable_size"):
			key = "evictable_size"
		default:
			key = strings.TrimPrefix(key, "self.")
		}
		if _, dup := vals[key]; !dup {
			vals[key] = n
		}
	}
	avail, hasAvail := vals["available_size"]
	if c.Pool == "req_to_token_pool" {
		c.Capacity = vals["total_size"]
		c.Leaked = c.Capacity - avail
		return c, hasAvail && c.Capacity > 0
	}
	c.Capacity = vals["max_total_num_tokens"]
	c.Protected = vals["protected_size"]
	evict, hasEvict := vals["evictable_size"]
	switch x, hasX := vals["allocator_available"]; {
	case hasX && hasEvict:
		c.Leaked = c.Capacity - x - evict
	case hasEvict: // v0.5.3+: available_size is the allocator's alone
		c.Leaked = c.Capacity - avail - evict
	default: // v0.4: available_size already holds the evictable cache
		c.Leaked = c.Capacity - avail
	}
	return c, hasAvail && c.Capacity > 0
}

// SGLang's startup line (model_runner / scheduler init, v0.4-v0.5):
// "max_total_num_tokens=665690, chunked_prefill_size=8192, …", and
// "KV Cache is allocated. #tokens: 25169, K size: …" (memory_pool.py).
var (
	maxTotalKey = []byte("max_total_num_tokens=")
	kvAllocKey  = []byte("KV Cache is allocated. #tokens:")
)
