#!/usr/bin/env python
"""Benchmark of the in-memory stores against naive baselines measured in the same run.

Prints tables (it asserts nothing): µs/op and ops/s of

- key-value ``put`` / ``get``,
- window ``put`` (overwrite), ``get`` and ``fetch(key, 10 windows)``,
- session ``put`` (overwrite), ``find_sessions(key, ts - gap, ts + gap)``,
- versioned ``put`` (out-of-order version), ``get(key)`` and ``get(key, as_of)``,
- plus the insert cost while building each store (``build put``),

at 10k, 100k and 1M live entries, each next to a naive baseline (a dict, scanned linearly for range
and as-of reads; the naive baseline's op count is cut at large sizes so the script ends in minutes),
the ratio of the cost at the largest size to the cost at the smallest (target: within 3x), and the
peak memory of each store per 1M entries (tracemalloc; keys and values are allocated before tracing,
so the figure is the store's own structure).

Usage: ``python scripts/bench/bench_stores.py [--quick] [--sizes 10000,100000] [--ops 20000]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from typing import Any, Callable

from streamproc.records import Windowed
from streamproc.stores import Stores

WINDOW_STARTS = 100  # window store: N entries = N / 100 keys x 100 window starts
WINDOW_SIZE = 1000
SESSIONS_PER_KEY = 10  # session store: N entries = N / 10 keys x 10 sessions
SESSION_SPACING = 1000
SESSION_LENGTH = 100
GAP = 300
VERSIONS_PER_KEY = 10  # versioned store: N entries = N / 10 keys x 10 versions
VERSION_SPACING = 100
BIG = 10**12  # retention that keeps everything live


REPEAT = 3  # each timed loop runs this many times; the fastest run counts (the machine is shared)
#: CPU time of this process, so other processes competing for the cores do not inflate the figures.
clock = time.process_time


def timed(loop: Callable[[], int], repeat: int | None = None) -> tuple[float, int]:
    """Run ``loop`` (returns its op count) ``repeat`` times; return (fastest seconds, ops)."""
    best = float("inf")
    n = 0
    for _ in range(REPEAT if repeat is None else repeat):
        start = clock()
        n = loop()
        best = min(best, clock() - start)
    return best, n


class Results:
    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.rows: list[tuple[str, str, int, float, float | None]] = []  # (store, op, N, ours_us, naive_us)

    def add(self, store: str, op: str, n: int, ours: tuple[float, int], naive: tuple[float, int] | None) -> None:
        ours_us = ours[0] / ours[1] * 1e6
        naive_us = naive[0] / naive[1] * 1e6 if naive else None
        self.rows.append((store, op, n, ours_us, naive_us))
        if self.quiet:
            return
        naive_txt = f"{naive_us:12.2f} {1e6 / naive_us:12,.0f} {naive_us / ours_us:9.1f}x" if naive_us else ""
        print(f"{store:10} {op:26} {n:>9,} {ours_us:10.2f} {1e6 / ours_us:12,.0f} {naive_txt}", flush=True)


def naive_count(ops: int, n: int) -> int:
    """How many ops of an O(n) baseline to run: about 2e7 element visits, at least 5."""
    return max(5, min(ops, 20_000_000 // n))


# -- key-value --------------------------------------------------------------------------------
def bench_key_value(n: int, ops: int, res: Results, rng: random.Random) -> None:
    keys = [f"key-{i:09d}" for i in range(n)]
    store = Stores.in_memory_key_value_store("kv")
    put = store.put
    shuffled = keys[:]
    rng.shuffle(shuffled)

    def build() -> int:
        for k in shuffled:
            put(k, 1)
        return n
    naive: dict[str, int] = {}

    def build_naive() -> int:
        for k in shuffled:
            naive[k] = 1
        return n
    res.add("key_value", "build put (insert)", n, timed(build, 1), timed(build_naive, 1))
    sample = [rng.choice(keys) for _ in range(ops)]

    def puts() -> int:
        for k in sample:
            put(k, 2)
        return ops

    def puts_naive() -> int:
        for k in sample:
            naive[k] = 2
        return ops
    res.add("key_value", "put (overwrite)", n, timed(puts), timed(puts_naive))
    get = store.get

    def gets() -> int:
        for k in sample:
            get(k)
        return ops
    res.add("key_value", "get", n, timed(gets), timed(lambda: sum(1 for k in sample if naive.get(k) or True)))
    rng_sample = sample[: max(1, ops // 10)]
    rng_ops = len(rng_sample)
    kv_range = store.range

    def ranges() -> int:
        for k in rng_sample:
            list(kv_range(k, k[:-2] + "99"))
        return rng_ops
    nn = naive_count(rng_ops, n)

    def ranges_naive() -> int:
        for k in rng_sample[:nn]:
            hi = k[:-2] + "99"
            sorted((kk, v) for kk, v in naive.items() if k <= kk <= hi)
        return nn
    res.add("key_value", "range (<=100 keys)", n, timed(ranges), timed(ranges_naive))


# -- window -----------------------------------------------------------------------------------
def fill_window(n: int) -> tuple[Any, list[str], Callable[[], int]]:
    n_keys = max(1, n // WINDOW_STARTS)
    keys = [f"user-{i:08d}" for i in range(n_keys)]
    store = Stores.in_memory_window_store("w", BIG, WINDOW_SIZE)
    put = store.put

    def build() -> int:
        for s in range(WINDOW_STARTS):
            start = s * WINDOW_SIZE
            for k in keys:
                put(k, s, start)
        return n_keys * WINDOW_STARTS
    return store, keys, build


def bench_window(n: int, ops: int, res: Results, rng: random.Random) -> None:
    store, keys, build = fill_window(n)
    naive: dict[tuple[str, int], int] = {}

    def build_naive() -> int:
        for s in range(WINDOW_STARTS):
            start = s * WINDOW_SIZE
            for k in keys:
                naive[(k, start)] = s
        return len(keys) * WINDOW_STARTS
    res.add("window", "build put (insert)", n, timed(build, 1), timed(build_naive, 1))
    sample = [(rng.choice(keys), rng.randrange(WINDOW_STARTS) * WINDOW_SIZE) for _ in range(ops)]
    put = store.put

    def puts() -> int:
        for k, start in sample:
            put(k, 7, start)
        return ops

    def puts_naive() -> int:
        for k, start in sample:
            naive[(k, start)] = 7
        return ops
    res.add("window", "put (overwrite)", n, timed(puts), timed(puts_naive))
    get = store.get

    def gets() -> int:
        for k, start in sample:
            get(k, start)
        return ops

    def gets_naive() -> int:
        for k, start in sample:
            naive.get((k, start))
        return ops
    res.add("window", "get", n, timed(gets), timed(gets_naive))
    fetch = store.fetch
    span = 9 * WINDOW_SIZE

    def fetches() -> int:
        for k, start in sample:
            list(fetch(k, start, start + span))
        return ops
    nn = naive_count(ops, n)

    def fetches_naive() -> int:
        for k, start in sample[:nn]:
            hi = start + span
            sorted((s, v) for (kk, s), v in naive.items() if kk == k and start <= s <= hi)
        return nn
    res.add("window", "fetch (key, 10 windows)", n, timed(fetches), timed(fetches_naive))


# -- session ----------------------------------------------------------------------------------
def fill_session(n: int) -> tuple[Any, list[str], Callable[[], int]]:
    n_keys = max(1, n // SESSIONS_PER_KEY)
    keys = [f"user-{i:08d}" for i in range(n_keys)]
    windows = [[Windowed(k, j * SESSION_SPACING, j * SESSION_SPACING + SESSION_LENGTH)
                for j in range(SESSIONS_PER_KEY)] for k in keys]
    store = Stores.in_memory_session_store("s", BIG)
    put = store.put

    def build() -> int:
        for j in range(SESSIONS_PER_KEY):
            for per_key in windows:
                put(per_key[j], j)
        return n_keys * SESSIONS_PER_KEY
    return store, keys, build


def bench_session(n: int, ops: int, res: Results, rng: random.Random) -> None:
    store, keys, build = fill_session(n)
    naive: dict[tuple[str, int, int], int] = {}

    def build_naive() -> int:
        for j in range(SESSIONS_PER_KEY):
            for k in keys:
                naive[(k, j * SESSION_SPACING, j * SESSION_SPACING + SESSION_LENGTH)] = j
        return len(keys) * SESSIONS_PER_KEY
    res.add("session", "build put (insert)", n, timed(build, 1), timed(build_naive, 1))
    sample = []
    for _ in range(ops):
        j = rng.randrange(SESSIONS_PER_KEY)
        sample.append((rng.choice(keys), j * SESSION_SPACING, j * SESSION_SPACING + SESSION_LENGTH))
    put = store.put

    def puts() -> int:
        for k, start, end in sample:
            put(Windowed(k, start, end), 5)
        return ops

    def puts_naive() -> int:
        for k, start, end in sample:
            naive[(k, start, end)] = 5
        return ops
    res.add("session", "put (overwrite)", n, timed(puts), timed(puts_naive))
    find = store.find_sessions

    def finds() -> int:
        for k, start, _ in sample:
            ts = start + 150  # 50 ms after the session's end: within the gap, merges with it
            list(find(k, ts - GAP, ts + GAP))
        return ops
    nn = naive_count(ops, n)

    def finds_naive() -> int:
        for k, start, _ in sample[:nn]:
            ts = start + 150
            lo, hi = ts - GAP, ts + GAP
            sorted(((e, s), v) for (kk, s, e), v in naive.items() if kk == k and e >= lo and s <= hi)
        return nn
    res.add("session", "find_sessions", n, timed(finds), timed(finds_naive))


# -- versioned --------------------------------------------------------------------------------
def fill_versioned(n: int) -> tuple[Any, list[str], Callable[[], int]]:
    n_keys = max(1, n // VERSIONS_PER_KEY)
    keys = [f"rate-{i:08d}" for i in range(n_keys)]
    store = Stores.in_memory_versioned_store("v", BIG)
    put = store.put

    def build() -> int:
        for j in range(VERSIONS_PER_KEY):
            ts = j * VERSION_SPACING
            for k in keys:
                put(k, j, ts)
        return n_keys * VERSIONS_PER_KEY
    return store, keys, build


def bench_versioned(n: int, ops: int, res: Results, rng: random.Random) -> None:
    store, keys, build = fill_versioned(n)
    naive: dict[tuple[str, int], int] = {}

    def build_naive() -> int:
        for j in range(VERSIONS_PER_KEY):
            for k in keys:
                naive[(k, j * VERSION_SPACING)] = j
        return len(keys) * VERSIONS_PER_KEY
    res.add("versioned", "build put (insert)", n, timed(build, 1), timed(build_naive, 1))
    horizon = VERSIONS_PER_KEY * VERSION_SPACING
    sample = [(rng.choice(keys), rng.randrange(horizon)) for _ in range(ops)]
    put = store.put

    def puts() -> int:  # an out-of-order version into the middle of the key's history
        for k, ts in sample:
            put(k, 9, ts - ts % VERSION_SPACING)
        return ops

    def puts_naive() -> int:
        for k, ts in sample:
            naive[(k, ts - ts % VERSION_SPACING)] = 9
        return ops
    res.add("versioned", "put (older version)", n, timed(puts), timed(puts_naive))
    get = store.get

    def gets_latest() -> int:
        for k, _ in sample:
            get(k)
        return ops
    nn = naive_count(ops, n)

    def latest_naive() -> int:
        for k, _ in sample[:nn]:
            max((ts for (kk, ts) in naive if kk == k), default=None)
        return nn
    res.add("versioned", "get(key)", n, timed(gets_latest), timed(latest_naive))

    def gets_as_of() -> int:
        for k, as_of in sample:
            get(k, as_of)
        return ops

    def as_of_naive() -> int:
        for k, as_of in sample[:nn]:
            max((ts for (kk, ts) in naive if kk == k and ts <= as_of), default=None)
        return nn
    res.add("versioned", "get(key, as_of)", n, timed(gets_as_of), timed(as_of_naive))


# -- memory -----------------------------------------------------------------------------------
def peak_memory(fill: Callable[[int], tuple[Any, list[str], Callable[[], int]]], n: int) -> tuple[int, int]:
    """(peak traced bytes while building, entries) for a store of ``n`` entries."""
    store, _keys, build = fill(n)
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    entries = build()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del store
    gc.collect()
    return peak, entries


def fill_key_value(n: int) -> tuple[Any, list[str], Callable[[], int]]:
    keys = [f"key-{i:09d}" for i in range(n)]
    store = Stores.in_memory_key_value_store("kv")
    put = store.put

    def build() -> int:
        for k in keys:
            put(k, 1)
        return n
    return store, keys, build


def fill_naive_dict(n: int) -> tuple[Any, list[str], Callable[[], int]]:
    keys = [f"key-{i:09d}" for i in range(n)]
    d: dict[str, int] = {}

    def build() -> int:
        for k in keys:
            d[k] = 1
        return n
    return d, keys, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (1k, 10k) and fewer ops")
    parser.add_argument("--sizes", help="comma-separated live-entry counts (default 10000,100000,1000000)")
    parser.add_argument("--ops", type=int, help="timed ops per measurement (default 20000; quick 2000)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000])
    ops = args.ops or (2_000 if args.quick else 20_000)
    rng = random.Random(args.seed)
    print(f"python {sys.version.split()[0]}; sizes {sizes}; {ops} timed ops per row "
          f"(process CPU time, best of {REPEAT} runs; builds run once; "
          f"naive O(n) rows: ~2e7 element visits, at least 5 ops)\n")
    print(f"{'store':10} {'op':26} {'entries':>9} {'ours us/op':>10} {'ours ops/s':>12} "
          f"{'naive us/op':>12} {'naive ops/s':>12} {'speedup':>10}")
    res = Results()
    wall = time.perf_counter()
    for bench in (bench_key_value, bench_window, bench_session, bench_versioned):  # warm-up, not shown
        bench(1_000, 200, Results(quiet=True), random.Random(0))
    for n in sizes:
        for bench in (bench_key_value, bench_window, bench_session, bench_versioned):
            bench(n, ops, res, rng)
            gc.collect()
        print()

    small, large = sizes[0], sizes[-1]
    print(f"Growth: cost at {large:,} entries / cost at {small:,} entries (target: within 3x)")
    print(f"{'store':10} {'op':26} {'us/op @' + format(small, ','):>16} {'us/op @' + format(large, ','):>18} "
          f"{'ratio':>7}  ours   {'naive ratio':>11}")
    by = {(s, op, n): (o, nv) for s, op, n, o, nv in res.rows}
    worst = 0.0
    for s, op, n, _o, _nv in res.rows:
        if n != small:
            continue
        o_small, nv_small = by[(s, op, small)]
        o_large, nv_large = by[(s, op, large)]
        ratio = o_large / o_small
        worst = max(worst, ratio)
        naive_ratio = f"{nv_large / nv_small:11.1f}" if nv_small and nv_large else ""
        verdict = "ok " if ratio <= 3 else "OVER"
        print(f"{s:10} {op:26} {o_small:16.2f} {o_large:18.2f} {ratio:7.2f}  {verdict}  {naive_ratio}")
    print(f"worst ratio: {worst:.2f}\n")

    if not args.no_memory:
        print(f"Peak memory while building {large:,} entries (tracemalloc; keys/values pre-allocated)")
        print(f"{'store':22} {'entries':>9} {'peak MB':>9} {'bytes/entry':>12} {'MB per 1M entries':>18}")
        for label, fill in (("key_value", fill_key_value), ("window", fill_window), ("session", fill_session),
                            ("versioned", fill_versioned), ("naive dict (baseline)", fill_naive_dict)):
            peak, entries = peak_memory(fill, large)
            print(f"{label:22} {entries:>9,} {peak / 1e6:9.1f} {peak / entries:12.0f} "
                  f"{peak / entries * 1e6 / 1e6:18.0f}", flush=True)
    print(f"\ntotal wall time {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
