#!/usr/bin/env python3
"""A toy scheduler that records its KV pool in a vramscope ledger (vramscope_hook.pool), with
the retried-chunk bug of sglang PR #20476: a chunked request rejected in a cycle is matched
again when retried and takes its prefix's pages a second time; one release comes at its end.

    PYTHONPATH=capture/hook python3 testdata/pools/ledger_demo.py OUT_DIR

writes OUT_DIR/ledger_demo_rank0_pid{P}_pool_token_to_kv_pool.ledger.jsonl; the committed
testdata/pools/scheduler.ledger.jsonl is one such run (seed 4). Deterministic but for times.
"""
import random
import sys

import vramscope_hook

PREFIX = 256  # tokens of the shared prefix each request matches


def match_prefix(kv, rid):
    kv.alloc(PREFIX, owner=rid)  # the prefix's pages, locked for this request


def prefill_chunk(kv, rid, n):
    kv.alloc(n, owner=rid)


def retry_rejected(kv, rid):
    # The bug: the retry matches the prefix again instead of reusing the first match.
    match_prefix(kv, rid)


def finish(kv, rid, n):
    kv.free(PREFIX + n, owner=rid)  # one release of the prefix, whatever was taken


def main():
    rng = random.Random(4)
    kv = vramscope_hook.pool("token_to_kv_pool", 65536, "tokens", out=sys.argv[1])
    for batch in range(20):
        reqs = ["req-%d-%d" % (batch, i) for i in range(rng.randrange(2, 6))]
        sizes = {}
        for rid in reqs:
            match_prefix(kv, rid)
            sizes[rid] = rng.randrange(100, 900)
            prefill_chunk(kv, rid, sizes[rid])
            if rng.random() < 0.15:  # rejected once for lack of budget, retried
                retry_rejected(kv, rid)
        for rid in reqs:
            finish(kv, rid, sizes[rid])
        kv.idle()  # nothing runs between batches
    kv.close()


if __name__ == "__main__":
    main()
