#!/usr/bin/env python3
"""A serving engine's scheduler in miniature, writing its logs in SGLang's or vLLM's real format.

The pool leak of sglang PR #20476 (seed 004) with the bug switchable, and healthy runs under
steady, heavy, bursty and daily load, for vramscope's pool-leak tests (pools/, testdata/pools/).
Standard library only; the same seed writes the same bytes.

Model: a KV pool of --capacity tokens (vLLM: pages of 16); a prefix cache of nodes with lock
counts (a shared system prompt, one node per streaming session); requests arrive as a Poisson
process, wait, are admitted while the prefill budget (--chunk tokens a cycle) lasts, are
prefilled in chunks when longer, then decode. A finished request's tokens go to the cache,
where they are evictable once unlocked; the engines' counters leave evictable cache out.

--bug sglang: a streaming-session request that needs chunking and is rejected in a cycle
(budget spent) is retried and locks its session's node again; one release comes at the end,
so the node stays protected forever (PR #20476). vllm: an aborted request's blocks are not
freed. At an idle moment SGLang's check_memory raises (--idle-check raise) and the log ends.

Usage: simulate.py --engine sglang-0.4|sglang-0.5|vllm --load steady|heavy|bursty|daily
                   --hours H [--bug] [--idle-check off] [--prefix none|tp|dp] [--seed N] > server.log
(make.sh writes the committed fixtures.)
"""

import argparse
import datetime
import math
import random
import sys

CYCLE = 2.0  # simulated seconds per scheduler cycle
DECODE_PER_CYCLE = 60  # tokens a running request generates per cycle


class Node:
    __slots__ = ("tokens", "lock", "used_at", "session", "leaked")

    def __init__(self, tokens, session=None):
        self.tokens, self.lock, self.used_at, self.session = tokens, 0, 0.0, session
        self.leaked = 0  # locks taken that no release will match (the bug)


class Req:
    __slots__ = ("rid", "node", "prompt", "todo", "out", "gen", "own", "session", "locked", "abort")

    def __init__(self, rid, node, prompt, out, session):
        self.rid, self.node, self.prompt, self.out, self.session = rid, node, prompt, out, session
        self.todo, self.gen, self.own, self.locked, self.abort = prompt, 0, 0, 0, False


class Engine:
    def __init__(self, a, rng, write, rank=1):
        self.a, self.rng, self.write, self.rank = a, rng, write, rank
        self.page = 16 if a.engine == "vllm" else 1
        self.cap = a.capacity
        self.allocated = 0  # pool tokens held by requests, cache nodes and leaked aborts
        self.system = Node(2000)
        self.nodes = [self.system]
        self.allocated += self.system.tokens
        self.waiting, self.running = [], []
        self.sessions = {}
        self.rid = 0
        self.leaked_aborts = 0
        self.first_leak = None

    # pool arithmetic, in the engines' terms
    def evictable(self):
        return sum(n.tokens for n in self.nodes if n.lock == 0)

    def protected(self):
        return sum(n.tokens for n in self.nodes if n.lock > 0)

    def available(self):
        return self.cap - self.allocated

    def used(self):  # SGLang's #token: max_total - (available + evictable)
        return self.cap - (self.available() + self.evictable())

    def pages(self, n):
        return -(-n // self.page) * self.page

    def take(self, n, now):
        """Allocates n tokens, evicting unlocked cache (least recently used first)."""
        n = self.pages(n)
        if self.available() < n:
            for node in sorted((x for x in self.nodes if x.lock == 0 and x is not self.system), key=lambda x: x.used_at):
                self.nodes.remove(node)
                self.allocated -= node.tokens
                if node.session is not None:
                    self.sessions.pop(node.session, None)
                if self.available() >= n:
                    break
        if self.available() < n:
            return False
        self.allocated += n
        return True

    def arrive(self, now):
        a, rng = self.a, self.rng
        self.rid += 1
        session = None
        node = self.system
        if rng.random() < a.sessions:
            session = rng.randrange(a.session_pool)
            node = self.sessions.get(session)
            if node is None:
                node = Node(0, session)
                self.nodes.append(node)
                self.sessions[session] = node
        prompt = int(rng.lognormvariate(6.5, 0.9))
        if rng.random() < 0.05:
            prompt = rng.randrange(8000, 24000)  # long documents
        out = rng.randrange(20, 800)
        self.waiting.append(Req(self.rid, node, prompt, out, session))

    def cycle(self, now):
        a = self.a
        budget = a.chunk
        admitted, new_tokens, cached = 0, 0, 0
        still = []
        # Longest cached prefix first, as SGLang's default policy (lpm) orders the queue.
        self.waiting.sort(key=lambda r: -r.node.tokens)
        for r in self.waiting:
            if len(self.running) >= a.max_running or budget <= 0:
                # Rejected this cycle. The bug: a streaming-session request that will be
                # chunked and was already matched locks its node again on the retry.
                if a.bug and a.engine != "vllm" and r.session is not None and r.locked and self.rng.random() < a.bug_rate:
                    r.node.lock += 1
                    r.node.leaked += 1
                    r.locked += 1
                    self.first_leak = self.first_leak if self.first_leak is not None else now
                still.append(r)
                continue
            if not r.locked:
                r.node.lock += 1
                r.locked = 1
                cached += r.node.tokens
            step = min(r.todo, budget)
            if not self.take(step, now):
                still.append(r)
                continue
            r.own += self.pages(step)
            r.todo -= step
            budget -= step
            new_tokens += step
            if r.todo == 0:
                self.running.append(r)
                admitted += 1
            else:
                still.append(r)  # the rest of its chunks next cycle
        self.waiting = still
        if admitted or new_tokens:
            self.log_prefill(now, admitted, new_tokens, cached)
        gen = 0
        done = []
        for r in self.running:
            n = min(DECODE_PER_CYCLE, r.out - r.gen)
            if not self.take(n, now):
                continue
            r.own += self.pages(n)
            r.gen += n
            gen += n
            if a.engine == "vllm" and self.rng.random() < a.aborts:
                r.abort = True
            if r.gen >= r.out or r.abort:
                done.append(r)
        for r in done:
            self.finish(r, now)
        return gen

    def finish(self, r, now):
        self.running.remove(r)
        if r.abort and self.a.bug:
            self.leaked_aborts += r.own  # vLLM bug: the aborted request's blocks stay allocated
            self.first_leak = self.first_leak if self.first_leak is not None else now
            r.node.lock -= 1
            return
        # Its tokens go to the cache: the session's node grows, others make a node of their own.
        r.node.lock -= 1  # released once, however often it was taken
        r.node.used_at = now
        if r.session is not None and self.sessions.get(r.session) is r.node:
            r.node.tokens += r.own
        else:
            n = Node(r.own)
            n.used_at = now
            self.nodes.append(n)
        if r.session is not None and self.rng.random() < 0.2:
            self.sessions.pop(r.session, None)  # the session closes; its node stays as cache

    def leaked(self):
        """What the bug leaked: tokens of nodes with locks never released, blocks of aborts."""
        return sum(n.tokens for n in self.nodes if n.leaked) + self.leaked_aborts

    def truth(self, others=()):
        """What leaked, as JSON: the first rank's, and with several ranks each rank's (by its log prefix)."""
        leaked = self.leaked()
        first = None
        if self.first_leak is not None:
            first = (self.a.t0 + datetime.timedelta(seconds=self.first_leak)).strftime("%Y-%m-%d %H:%M:%S")
        s = '{"leak": %s, "leaked_tokens": %d, "first_leak": %s' % (
            "true" if leaked else "false", leaked, '"%s"' % first if first else "null")
        if others:
            s += ', "ranks": {%s}' % ", ".join('"DP%d TP0": %d' % (e.rank, e.leaked()) for e in (self,) + tuple(others))
        return s + "}"

    # logging, in each engine's format
    def stamp(self, now):
        t = self.a.t0 + datetime.timedelta(seconds=now)
        if self.a.engine == "vllm":
            return "(APIServer pid=1637) INFO %s [loggers.py:123] Engine 000: " % t.strftime("%m-%d %H:%M:%S")
        rank = {"none": "", "tp": " TP0", "dp": " DP%d TP0" % self.rank}[self.a.prefix]
        return "[%s%s] " % (t.strftime("%Y-%m-%d %H:%M:%S"), rank)

    def usage(self):
        return self.used() / self.cap

    def log_prefill(self, now, seqs, new, cached):
        if self.a.engine == "vllm":
            return
        line = "%sPrefill batch%s#new-seq: %d, #new-token: %d, #cached-token: %d, token usage: %.2f, #running-req: %d, #queue-req: %d" % (
            self.stamp(now), ". " if self.a.engine == "sglang-0.4" else ", ", seqs, new, cached, self.usage(), len(self.running), len(self.waiting))
        if self.a.engine == "sglang-0.5":
            line += ", #pending-token: 0, cuda graph: False, input throughput (token/s): %.2f, " % (new / CYCLE)
        self.write(line + "\n")

    def log_decode(self, now, gen_rate):
        if self.a.engine == "vllm":
            self.write(
                "%sAvg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%\n"
                % (self.stamp(now), gen_rate * 0.4, gen_rate, len(self.running), len(self.waiting), 100 * self.usage(), 41.7)
            )
            return
        if not self.running:
            return
        if self.a.engine == "sglang-0.4":
            fmt = "%sDecode batch. #running-req: %d, #token: %d, token usage: %.2f, gen throughput (token/s): %.2f, #queue-req: %d\n"
        else:
            fmt = "%sDecode batch, #running-req: %d, #token: %d, token usage: %.2f, cuda graph: True, gen throughput (token/s): %.2f, #queue-req: %d, \n"
        self.write(fmt % (self.stamp(now), len(self.running), self.used(), self.usage(), gen_rate, len(self.waiting)))

    def idle_check(self, now):
        """SGLang's check_memory when nothing runs or waits; True when it raised."""
        if self.a.engine == "vllm" or self.a.idle_check == "off" or self.running or self.waiting:
            return False
        avail, evict, prot = self.available(), self.evictable(), self.protected()
        if avail + evict == self.cap:
            return False
        st = self.stamp(now)
        w = self.write
        w("%sScheduler hit an exception: Traceback (most recent call last):\n" % st)
        w('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2650, in run_scheduler_process\n')
        w("    scheduler.event_loop_overlap()\n")
        w('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 770, in event_loop_overlap\n')
        w("    self.self_check_during_idle()\n")
        if self.a.engine == "sglang-0.4":
            w("ValueError: token_to_kv_pool_allocator memory leak detected! available_size=%d, protected_size=%d, self.max_total_num_tokens=%d\n" % (avail + evict, prot, self.cap))
            w("self.token_to_kv_pool_allocator.available_size()=%d\n" % avail)
            w("self.tree_cache.evictable_size()=%d\n" % evict)
        else:
            w("ValueError: token_to_kv_pool_allocator memory leak detected! self.max_total_num_tokens=%d, available_size=%d, evictable_size=%d, protected_size=%d\n" % (self.cap, avail, evict, prot))
        w("\n%sReceived sigquit from a child process. It usually means the child failed.\n" % self.stamp(now + 1))
        w("Killed\n")
        return True


def rate(load, now, period=24):
    """Requests a second at time now; daily load repeats every period hours."""
    h = now / 3600.0 * 24 / period
    if load == "steady":
        return 0.35
    if load == "heavy":
        return 1.6
    if load == "bursty":  # a burst of 6 minutes every 40 (batch clients), quiet between
        return 2.4 if (now % 2400) < 360 else 0.15
    # daily: busy afternoon, quiet night, never idle
    return 0.3 + 0.9 * (1 + math.sin(2 * math.pi * (h - 8) / 24)) / 2


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", default="sglang-0.4", choices=["sglang-0.4", "sglang-0.5", "vllm"])
    p.add_argument("--load", default="steady", choices=["steady", "heavy", "bursty", "daily"])
    p.add_argument("--hours", type=float, default=4)
    p.add_argument("--period", type=float, default=24, help="hours of one quiet-busy-quiet cycle of daily load")
    p.add_argument("--bug", action="store_true")
    p.add_argument("--prefix", default="tp", choices=["none", "tp", "dp"])
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--capacity", type=int, default=400000)
    p.add_argument("--chunk", type=int, default=8192)
    p.add_argument("--max-running", type=int, default=48)
    p.add_argument("--sessions", type=float, default=0.3, help="share of requests in streaming sessions")
    p.add_argument("--session-pool", type=int, default=400)
    p.add_argument("--aborts", type=float, default=0.002, help="vLLM: chance a decode step aborts its request")
    p.add_argument("--bug-rate", type=float, default=0.05, help="chance a rejected retry takes the lock again")
    p.add_argument("--idle-check", default="raise", choices=["raise", "off"], help="off: SGLang's idle check skipped (elastic memory, hierarchical cache)")
    p.add_argument("--log-every", type=int, default=5, help="cycles between decode lines (SGLang's decode_log_interval)")
    p.add_argument("--idle-every", type=float, default=0, help="hours between maintenance pauses (no traffic for 2 minutes)")
    p.add_argument("--start", default="2026-03-02 08:00:00")
    p.add_argument("--truth", help="write what leaked, as JSON, to this file")
    p.add_argument("--ranks", type=int, default=1, help="DP ranks, each with its own pool and lines (--prefix dp)")
    a = p.parse_args()
    a.t0 = datetime.datetime.strptime(a.start, "%Y-%m-%d %H:%M:%S")
    rng = random.Random(a.seed)
    out = sys.stdout
    e = Engine(a, rng, out.write)
    others = [Engine(a, random.Random(a.seed * 1000 + i), out.write, rank=i + 2) for i in range(a.ranks - 1)]
    if a.engine == "vllm":
        out.write("(EngineCore_0 pid=1702) INFO %s [kv_cache_utils.py:1087] GPU KV cache size: {:,} tokens\n".format(a.capacity) % a.t0.strftime("%m-%d %H:%M:%S"))
    else:
        out.write("%smax_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=16384, max_running_requests=%d, context_len=32768, available_gpu_mem=13.50 GB\n" % (e.stamp(0), a.capacity, a.chunk, a.max_running))
    now, cyc, gen = 0.0, 0, 0
    try:
        run(a, [e] + others, rng, now, cyc, gen)
    finally:
        if a.truth:
            with open(a.truth, "w") as f:
                f.write(e.truth(others) + "\n")


def run(a, engines, rng, now, cyc, gen):
    gens = [0] * len(engines)
    while now < a.hours * 3600:
        paused = a.idle_every > 0 and (now % (a.idle_every * 3600)) > a.idle_every * 3600 - 120
        cyc += 1
        for i, e in enumerate(engines):
            if not paused:
                # Poisson arrivals for this cycle
                L, k, prod = math.exp(-rate(a.load, now, a.period) * CYCLE), 0, e.rng.random()
                while prod > L:
                    k += 1
                    prod *= e.rng.random()
                for _ in range(k):
                    e.arrive(now)
            gens[i] += e.cycle(now)
            if cyc % a.log_every == 0:
                e.log_decode(now, gens[i] / (a.log_every * CYCLE))
                gens[i] = 0
            if e.idle_check(now):
                return
        now += CYCLE


if __name__ == "__main__":
    main()
