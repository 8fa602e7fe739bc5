// Package pools reads what a serving engine says about its own memory
// pools and tells whether they leak. SGLang and vLLM allocate their KV
// cache and request tables once, at start, and hand out slots themselves,
// so a slot that is never given back leaves no trace in torch's allocator:
// snapshots stay flat while the engine's free pool shrinks. The engines'
// logs count the pool's use; this package
//
//   - parses those lines (Parse; sglang.go and vllm.go hold the formats,
//     with the engine source each comes from), recognizing the engine by
//     content and counting, never failing on, lines it cannot read;
//   - estimates the floor of used tokens at low load over time (Floors):
//     tokens of finished requests move to the evictable prefix cache, which
//     the counters leave out, so a healthy pool returns to the same floor
//     whenever load falls;
//   - judges that floor with the trend statistics vramscope applies to
//     memory (internal/trend), and reads SGLang's idle-check errors, which
//     give the leaked tokens exactly (Judge).
//
// Package ledger reads the allocation ledger the Python hook writes for
// any pool.
package pools
