package pools

import "time"

// Engine names the server that wrote a log.
type Engine string

const (
	SGLang Engine = "sglang"
	VLLM   Engine = "vllm"
)

// Sample is one periodic stats line: how much of the pool is in use at one
// moment and under how much load. A day of logs holds millions: the
// fields are no wider than the numbers the engines print.
type Sample struct {
	// At is the line's time, in seconds from the log's first time stamp,
	// or its line number when the log has no time stamps.
	At float64
	// Used is the pool's tokens held by running requests and by locked
	// prefix-cache entries; evictable cache counts as free. Lines that
	// print only a share (SGLang's prefill line, vLLM) get Share × the
	// log's capacity once the whole log is read (Log.Capacity).
	Used int64
	// Line is the line number, from 1.
	Line int
	// Share is the printed fraction of the pool in use (0 to 1, two or
	// three decimals).
	Share float32
	// Running and Queued count requests.
	Running, Queued int32
	// Admitted is the requests a prefill line admits (#new-seq); 0 on
	// other lines.
	Admitted int32
	// Exact is set when Used is a printed count (SGLang's #token), not a
	// rounded share.
	Exact bool
}

// Series is the samples of one rank, in the order of the log.
type Series struct {
	// Rank is the rank or engine the lines' prefix names ("TP0",
	// "DP1 TP0", "Engine 000"), "" when they name none. Each rank with
	// its own pool is a series of its own.
	Rank    string
	Samples []Sample
}

// IdleCheck is one of SGLang's idle-time pool checks that failed: the
// scheduler found no request running, yet pool slots were neither free
// nor evictable.
type IdleCheck struct {
	At   float64
	Line int
	// Pool is "token_to_kv_pool" or "req_to_token_pool".
	Pool string
	// Capacity is the pool's size in tokens (slots for req_to_token_pool).
	Capacity int64
	// Leaked is what no request holds: capacity minus free minus
	// evictable. With nothing running, tokens still protected by tree
	// locks are leaked too.
	Leaked int64
	// Protected is the part of Leaked that prefix-cache locks hold, when
	// the message prints it.
	Protected int64
}

// Log is what one serving log says about its pools.
type Log struct {
	Engine Engine
	// Start is the first time stamp, zero when the log has none; HasTime
	// says whether Sample.At counts seconds.
	Start   time.Time
	HasTime bool
	// Layout formats a time as the log prints it (no year for vLLM).
	Layout string
	// Capacity is the KV pool's size in tokens (SGLang's
	// max_total_num_tokens, vLLM's "GPU KV cache size"); when the log
	// prints none, SGLang's is estimated from #token / token usage and
	// vLLM's stays 0: Used then counts tenths of a percent (Unit).
	Capacity int64
	// Series holds each rank's samples, in the order of the ranks' first
	// lines.
	Series []Series
	Idle   []IdleCheck
	// Lines counts every line read; Unparsed the lines that look like
	// pool stats but could not be read, FirstUnparsed the first of them.
	Lines, Unparsed int
	FirstUnparsed   string
}

// NumSamples counts the samples of every series.
func (l *Log) NumSamples() int {
	n := 0
	for _, s := range l.Series {
		n += len(s.Samples)
	}
	return n
}

// Unit is what Sample.Used counts.
func (l *Log) Unit() string {
	if l.Capacity == 0 {
		return "0.1% of the pool"
	}
	return "tokens"
}

// poolSize is the capacity Used is measured against.
func (l *Log) poolSize() int64 {
	if l.Capacity == 0 {
		return 1000
	}
	return l.Capacity
}
