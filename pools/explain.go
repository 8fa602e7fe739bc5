package pools

import "fmt"

// Causes names what leaks this pool in this engine and what to check.
func (lk Leak) Causes() string {
	switch {
	case lk.Pool == "req_to_token_pool":
		return "Request slots stay taken after their requests end: a request that is aborted, retracted or " +
			"retried keeps its req_pool_idx. Check the abort and retract paths and streaming sessions that " +
			"are never closed (close_session)."
	case lk.Engine == VLLM:
		return "KV blocks stay referenced after their requests end: look for requests that are aborted or " +
			"time out without being freed (client disconnects on streaming), and for connectors or LoRA " +
			"adapters that hold blocks. Compare num_requests_running with the API server's open requests."
	}
	return "Tokens stay locked in the radix cache after their requests end, so they are neither free nor " +
		"evictable. Known causes: streaming-session chunked requests that the scheduler rejects and " +
		"retries take the tree locks twice and release them once (sglang PR #20476, fixed in March " +
		"2026: upgrade); sessions that are opened and never closed; aborted requests whose locks are " +
		"not released. Check whether the server runs streaming sessions with chunked prefill, count " +
		"open sessions, and run with SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE to catch it at the " +
		"first idle moment."
}

// Explain says in words what an idle check's message means.
func (c IdleCheck) Explain() string {
	what := "tokens"
	if c.Pool == "req_to_token_pool" {
		what = "request slots"
	}
	s := fmt.Sprintf("The scheduler's idle check found no request running or waiting, yet %d of %d %s of %s "+
		"were neither free nor evictable cache: they belong to no request and will never come back. ",
		c.Leaked, c.Capacity, what, c.Pool)
	if c.Protected > 0 {
		s += fmt.Sprintf("%d of them are protected by radix-tree locks that nobody holds any more. ", c.Protected)
	}
	return s + "SGLang raises this as a ValueError that stops the server (or only logs it when strict " +
		"idle checks are off); restarting frees the pool but the leak starts again."
}
