"""How the in-memory stores' point and range operations grow with the number of live entries.

For each store and operation the script measures µs/op at 10k, 100k and 1M live entries (default
sizes), next to a **dict baseline** measured in the same run, with the same keys and the same
access pattern: the least hash-table work that answers the same query (a dict ``key -> value`` for
key-value, ``(key, start) -> value`` for windows, ``key -> sessions`` for sessions, ``key ->
(timestamps, values)`` + bisect for versions, ``key -> newest`` for the newest). The operations:

- key-value ``put`` (overwrite), ``get``, ``range`` (<= 100 keys);
- window ``put`` (overwrite), ``get``, ``fetch(key, 10 windows)``;
- session ``put`` (overwrite), ``find_sessions(key, ts - gap, ts + gap)``;
- versioned ``put`` (a version into the key's history), ``get(key)``, ``get(key, as_of)``;
- plus the insert cost while building each store (``build put``, run once).

Two access patterns, the same at every size:

- ``uniform``: every op picks a key uniformly at random among all the store's keys. At 10k entries
  the whole store stays in the CPU caches; at 1M nearly every op misses them, so even a plain dict
  gets several times slower (this growth is memory latency, not algorithm).
- ``hot``: every op picks a key uniformly at random among a fixed set of 10k entries (the same
  working-set size at every store size). Growth here is what the structure adds as it gets bigger
  (tree depth, bisects), with the cache effect of the working set held constant.

Then, per pattern, a growth table: ``ours(large) / ours(small)``, the same for the dict baseline,
and the **ratio of ratios** ``ours growth / dict growth`` (1.0 = the store gets slower exactly as
fast as a dict does). Issue 3's target, "1M-entry operations within 3x of their 10k-entry cost",
is checked on the raw growth of each pattern (printed as ``ok``/``OVER``); nothing is asserted.

Timing: ``--ops`` ops per measurement (default 100k), best of ``--repeat`` runs (default 5), ours and
the baseline alternating (and alternating which goes first), every run starting from flushed CPU
caches; process CPU time, so other processes on a shared machine inflate the figures less (they
still do, through the shared caches: report the load with ``uptime``).

Last: the peak memory of each store per 1M entries (tracemalloc; keys and values are allocated
before tracing, so the figure is the store's own structure).

Usage: ``python -m benchmarks.bench_stores [--quick] [--sizes 10000,100000] [--ops N] [--repeat R]
[--patterns uniform,hot] [--no-memory]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
import tracemalloc
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

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
HOT_ENTRIES = 10_000  # working set of the "hot" pattern, in entries
NAIVE_SCAN_BUDGET = 4_000_000  # entries the naive linear-scan baseline may visit per measurement

#: CPU time of this process, so other processes competing for the cores do not inflate the figures.
clock = time.process_time

Loop = Callable[[], int]


class Results:
    """Rows ``(pattern, store, op, entries) -> (ours µs/op, dict µs/op)``."""

    def __init__(self, repeat: int, quiet: bool = False) -> None:
        self.repeat = repeat
        self.quiet = quiet
        self.rows: dict[tuple[str, str, str, int], tuple[float, float]] = {}
        #: (store, op, entries) -> naive linear-scan µs/op (uniform access)
        self.naive: dict[tuple[str, str, int], float] = {}

    def measure_naive(self, store: str, op: str, n: int, naive: Callable[[list[Any]], int],
                      sample: list[Any]) -> None:
        """Time the naive baseline of a range query (every live entry scanned per query) on the
        first ``NAIVE_SCAN_BUDGET // n`` queries of ``sample`` (at least 3), best of 3 runs."""
        queries = sample[: max(3, NAIVE_SCAN_BUDGET // n)]
        best = float("inf")
        for _ in range(3):
            flush_caches()
            start = clock()
            done = naive(queries)
            best = min(best, (clock() - start) / done)
        self.naive[(store, op, n)] = best * 1e6
        if not self.quiet:
            print(f"{'naive':8} {store:10} {op:24} {n:>10,} {'':>10} {best * 1e6:10.1f}", flush=True)

    def measure(self, pattern: str, store: str, op: str, n: int, ours: Loop, base: Loop,
                repeat: int | None = None) -> None:
        """Time ``ours`` and ``base`` ``repeat`` times each, alternating which goes first, each run
        starting from flushed CPU caches (they share the key objects, so the second would otherwise
        find them cached); keep the fastest run of each."""
        best = {"ours": float("inf"), "base": float("inf")}
        count = {"ours": 1, "base": 1}
        loops = {"ours": ours, "base": base}
        for r in range(self.repeat if repeat is None else repeat):
            for which in (("ours", "base") if r % 2 == 0 else ("base", "ours")):
                flush_caches()
                start = clock()
                count[which] = loops[which]()
                best[which] = min(best[which], clock() - start)
        ours_us = best["ours"] / count["ours"] * 1e6
        base_us = best["base"] / count["base"] * 1e6
        self.rows[(pattern, store, op, n)] = (ours_us, base_us)
        if not self.quiet:
            print(f"{pattern:8} {store:10} {op:24} {n:>10,} {ours_us:10.3f} {base_us:10.3f} "
                  f"{ours_us / base_us:8.2f}", flush=True)


_FLUSH = bytearray(64 << 20)  # larger than the last-level cache of the machines we run on


def flush_caches() -> None:
    """Evict the CPU caches (write a 64 MB buffer) and collect garbage, outside the timed region."""
    gc.collect()
    _FLUSH[::64] = bytes(len(_FLUSH) // 64)


def pick(rng: random.Random, population: int, pattern: str, ops: int, per_key: int) -> list[int]:
    """Indexes of the keys to touch: ``ops`` draws, uniform over all keys or over the hot set."""
    keys = population if pattern == "uniform" else min(population, max(1, HOT_ENTRIES // per_key))
    if pattern == "hot" and keys < population:
        hot = rng.sample(range(population), keys)
        return [hot[rng.randrange(keys)] for _ in range(ops)]
    return [rng.randrange(keys) for _ in range(ops)]


# -- key-value --------------------------------------------------------------------------------
def bench_key_value(n: int, ops: int, res: Results, rng: random.Random, patterns: list[str]) -> None:
    keys = [f"key-{i:09d}" for i in range(n)]
    shuffled = keys[:]
    rng.shuffle(shuffled)
    store = Stores.in_memory_key_value_store("kv")
    base: dict[str, int] = {}
    put = store.put

    def build() -> int:
        for k in shuffled:
            put(k, 1)
        return n

    def build_base() -> int:
        for k in shuffled:
            base[k] = 1
        return n
    res.measure("build", "key_value", "build put (insert)", n, build, build_base, repeat=1)
    sorted_keys = sorted(base)  # the baseline's order for range reads: a sorted key list + bisect

    for pattern in patterns:
        key_value_ops(res, n, pattern, [keys[i] for i in pick(rng, n, pattern, ops, 1)], store, base, sorted_keys)


def key_value_ops(res: Results, n: int, pattern: str, sample: list[str], store: Any, base: dict[str, int],
                  sorted_keys: list[str]) -> None:
    put, get, kv_range = store.put, store.get, store.range

    def puts() -> int:
        for k in sample:
            put(k, 2)
        return len(sample)

    def puts_base() -> int:
        for k in sample:
            base[k] = 2
        return len(sample)
    res.measure(pattern, "key_value", "put (overwrite)", n, puts, puts_base)

    def gets() -> int:
        for k in sample:
            get(k)
        return len(sample)

    def gets_base() -> int:
        g = base.get
        for k in sample:
            g(k)
        return len(sample)
    res.measure(pattern, "key_value", "get", n, gets, gets_base)
    short = sample[: max(1, len(sample) // 10)]

    def ranges() -> int:
        for k in short:
            list(kv_range(k, k[:-2] + "99"))
        return len(short)

    def ranges_base() -> int:
        for k in short:
            lo = bisect_left(sorted_keys, k)
            hi = bisect_right(sorted_keys, k[:-2] + "99", lo)
            [(kk, base[kk]) for kk in sorted_keys[lo:hi]]
        return len(short)
    res.measure(pattern, "key_value", "range (<=100 keys)", n, ranges, ranges_base)
    if pattern != "uniform":
        return

    def ranges_naive(queries: list[str]) -> int:  # dict + linear scan + sort of the hits
        for k in queries:
            hi = k[:-2] + "99"
            sorted((kk, v) for kk, v in base.items() if k <= kk <= hi)
        return len(queries)
    res.measure_naive("key_value", "range (<=100 keys)", n, ranges_naive, sample)


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


def bench_window(n: int, ops: int, res: Results, rng: random.Random, patterns: list[str]) -> None:
    store, keys, build = fill_window(n)
    base: dict[tuple[str, int], int] = {}

    def build_base() -> int:
        for s in range(WINDOW_STARTS):
            start = s * WINDOW_SIZE
            for k in keys:
                base[(k, start)] = s
        return len(keys) * WINDOW_STARTS
    res.measure("build", "window", "build put (insert)", n, build, build_base, repeat=1)

    for pattern in patterns:
        # an entry is (key, start): draw the key (uniform or from the hot keys) and the start
        sample = [(keys[i], rng.randrange(WINDOW_STARTS) * WINDOW_SIZE)
                  for i in pick(rng, len(keys), pattern, ops, WINDOW_STARTS)]
        window_ops(res, n, pattern, sample, store, base)


def window_ops(res: Results, n: int, pattern: str, sample: list[tuple[str, int]], store: Any,
               base: dict[tuple[str, int], int]) -> None:
    put, get, fetch = store.put, store.get, store.fetch
    span = 9 * WINDOW_SIZE

    def puts() -> int:
        for k, start in sample:
            put(k, 7, start)
        return len(sample)

    def puts_base() -> int:
        for k, start in sample:
            base[(k, start)] = 7
        return len(sample)
    res.measure(pattern, "window", "put (overwrite)", n, puts, puts_base)

    def gets() -> int:
        for k, start in sample:
            get(k, start)
        return len(sample)

    def gets_base() -> int:
        g = base.get
        for k, start in sample:
            g((k, start))
        return len(sample)
    res.measure(pattern, "window", "get", n, gets, gets_base)
    short = sample[: max(1, len(sample) // 4)]

    def fetches() -> int:
        for k, start in short:
            list(fetch(k, start, start + span))
        return len(short)

    def fetches_base() -> int:  # knows the windows are WINDOW_SIZE apart: 10 lookups
        g = base.get
        for k, start in short:
            [(s, v) for s in range(start, start + span + 1, WINDOW_SIZE) if (v := g((k, s))) is not None]
        return len(short)
    res.measure(pattern, "window", "fetch (key, 10 windows)", n, fetches, fetches_base)
    if pattern != "uniform":
        return

    def fetches_naive(queries: list[tuple[str, int]]) -> int:  # dict + linear scan + sort of the hits
        for k, start in queries:
            hi = start + span
            sorted((s, v) for (kk, s), v in base.items() if kk == k and start <= s <= hi)
        return len(queries)
    res.measure_naive("window", "fetch (key, 10 windows)", n, fetches_naive, sample)


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


def bench_session(n: int, ops: int, res: Results, rng: random.Random, patterns: list[str]) -> None:
    store, keys, build = fill_session(n)
    base: dict[str, list[list[int]]] = {}  # key -> [[start, end, agg], ...] by end

    def build_base() -> int:
        for j in range(SESSIONS_PER_KEY):
            start = j * SESSION_SPACING
            for k in keys:
                lst = base.get(k)
                if lst is None:
                    base[k] = [[start, start + SESSION_LENGTH, j]]
                else:
                    lst.append([start, start + SESSION_LENGTH, j])
        return len(keys) * SESSIONS_PER_KEY
    res.measure("build", "session", "build put (insert)", n, build, build_base, repeat=1)
    by_window = {Windowed(k, s[0], s[1]): s[2] for k, lst in base.items() for s in lst}

    for pattern in patterns:
        sample = []
        for i in pick(rng, len(keys), pattern, ops, SESSIONS_PER_KEY):
            j = rng.randrange(SESSIONS_PER_KEY)
            sample.append((keys[i], j, j * SESSION_SPACING, j * SESSION_SPACING + SESSION_LENGTH))
        session_ops(res, n, pattern, sample, store, base, by_window)


def session_ops(res: Results, n: int, pattern: str, sample: list[tuple[str, int, int, int]], store: Any,
                base: dict[str, list[list[int]]], by_window: dict[Windowed, int]) -> None:
    put, find = store.put, store.find_sessions

    def puts() -> int:
        for k, _, start, end in sample:
            put(Windowed(k, start, end), 5)
        return len(sample)

    def puts_base() -> int:  # the same argument (a Windowed) into a dict keyed by it
        for k, _, start, end in sample:
            by_window[Windowed(k, start, end)] = 5
        return len(sample)
    res.measure(pattern, "session", "put (overwrite)", n, puts, puts_base)

    def finds() -> int:
        for k, _, start, _ in sample:
            ts = start + 150  # 50 ms after the session's end: within the gap, merges with it
            list(find(k, ts - GAP, ts + GAP))
        return len(sample)

    def finds_base() -> int:
        for k, _, start, _ in sample:
            ts = start + 150
            lo, hi = ts - GAP, ts + GAP
            [(Windowed(k, s[0], s[1]), s[2]) for s in base[k] if s[1] >= lo and s[0] <= hi]
        return len(sample)
    res.measure(pattern, "session", "find_sessions", n, finds, finds_base)
    if pattern != "uniform":
        return

    def finds_naive(queries: list[tuple[str, int, int, int]]) -> int:  # dict + linear scan over all sessions
        for k, _, start, _ in queries:
            ts = start + 150
            lo, hi = ts - GAP, ts + GAP
            sorted(((w.end, w.start), v) for w, v in by_window.items() if w.key == k and w.end >= lo and w.start <= hi)
        return len(queries)
    res.measure_naive("session", "find_sessions", n, finds_naive, sample)


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


def bench_versioned(n: int, ops: int, res: Results, rng: random.Random, patterns: list[str]) -> None:
    store, keys, build = fill_versioned(n)
    base: dict[str, tuple[list[int], list[int]]] = {}  # key -> (timestamps, values), ascending

    def build_base() -> int:
        for j in range(VERSIONS_PER_KEY):
            ts = j * VERSION_SPACING
            for k in keys:
                hist = base.get(k)
                if hist is None:
                    base[k] = ([ts], [j])
                else:
                    hist[0].append(ts)
                    hist[1].append(j)
        return len(keys) * VERSIONS_PER_KEY
    res.measure("build", "versioned", "build put (insert)", n, build, build_base, repeat=1)
    latest = {k: (stamps[-1], values[-1]) for k, (stamps, values) in base.items()}  # key -> newest
    horizon = VERSIONS_PER_KEY * VERSION_SPACING

    for pattern in patterns:
        sample = [(keys[i], rng.randrange(horizon)) for i in pick(rng, len(keys), pattern, ops, VERSIONS_PER_KEY)]
        versioned_ops(res, n, pattern, sample, store, base, latest)


def versioned_ops(res: Results, n: int, pattern: str, sample: list[tuple[str, int]], store: Any,
                  base: dict[str, tuple[list[int], list[int]]], latest: dict[str, tuple[int, int]]) -> None:
    put, get = store.put, store.get

    def puts() -> int:  # a version with an existing timestamp, mostly in the key's history
        for k, ts in sample:
            put(k, 9, ts - ts % VERSION_SPACING)
        return len(sample)

    def puts_base() -> int:
        for k, ts in sample:
            stamps, values = base[k]
            values[bisect_left(stamps, ts - ts % VERSION_SPACING)] = 9
        return len(sample)
    res.measure(pattern, "versioned", "put (existing version)", n, puts, puts_base)

    def gets_latest() -> int:
        for k, _ in sample:
            get(k)
        return len(sample)

    def latest_base() -> int:
        g = latest.get
        for k, _ in sample:
            g(k)
        return len(sample)
    res.measure(pattern, "versioned", "get(key)", n, gets_latest, latest_base)

    def gets_as_of() -> int:
        for k, as_of in sample:
            get(k, as_of)
        return len(sample)

    def as_of_base() -> int:
        for k, as_of in sample:
            stamps, values = base[k]
            i = bisect_right(stamps, as_of) - 1
            (values[i], stamps[i], stamps[i + 1] if i + 1 < len(stamps) else None)
        return len(sample)
    res.measure(pattern, "versioned", "get(key, as_of)", n, gets_as_of, as_of_base)
    if pattern != "uniform":
        return
    flat = {(k, ts): v for k, (stamps, values) in base.items() for ts, v in zip(stamps, values, strict=True)}

    def as_of_naive(queries: list[tuple[str, int]]) -> int:  # dict (key, ts) -> value + linear scan
        for k, as_of in queries:
            valid_from = max((ts for (kk, ts) in flat if kk == k and ts <= as_of), default=None)
            valid_to = min((ts for (kk, ts) in flat if kk == k and ts > as_of), default=None)
            if valid_from is not None:
                (flat[(k, valid_from)], valid_from, valid_to)
        return len(queries)
    res.measure_naive("versioned", "get(key, as_of)", n, as_of_naive, sample)


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


# -- report -----------------------------------------------------------------------------------
def growth_table(res: Results, pattern: str, small: int, large: int) -> float:
    """Print the growth of every op of ``pattern`` from ``small`` to ``large``; return the worst
    raw growth of ours."""
    print(f"\nGrowth, {pattern} access: cost at {large:,} entries / cost at {small:,} entries "
          f"(target: within 3x)")
    print(f"{'store':10} {'op':24} {'ours @small':>11} {'ours @large':>11} {'ours x':>7} "
          f"{'dict @small':>11} {'dict @large':>11} {'dict x':>7} {'ours x / dict x':>16}")
    worst = 0.0
    for (pat, store, op, n), (o_small, b_small) in res.rows.items():
        if pat != pattern or n != small or (pat, store, op, large) not in res.rows:
            continue
        o_large, b_large = res.rows[(pat, store, op, large)]
        ours_x, base_x = o_large / o_small, b_large / b_small
        worst = max(worst, ours_x)
        verdict = "ok" if ours_x <= 3 else "OVER"
        print(f"{store:10} {op:24} {o_small:11.3f} {o_large:11.3f} {ours_x:7.2f} "
              f"{b_small:11.3f} {b_large:11.3f} {base_x:7.2f} {ours_x / base_x:16.2f}  {verdict}")
    return worst


def naive_table(res: Results, small: int, large: int) -> None:
    """Print ours (the uniform-access rows) against the naive baseline (dict + a linear scan of every
    entry) for the range queries: µs/op at each size, how many times faster ours is, and the growth
    of both from the smallest to the largest size."""
    if not res.naive:
        return
    print("\nRange queries against the naive baseline (dict + linear scan of all entries), uniform access")
    print(f"{'store':10} {'op':24} {'entries':>10} {'ours us/op':>11} {'naive us/op':>12} {'naive / ours':>13}")
    for (store, op, n), naive_us in res.naive.items():
        ours_us = res.rows[("uniform", store, op, n)][0]
        print(f"{store:10} {op:24} {n:>10,} {ours_us:11.3f} {naive_us:12.1f} {naive_us / ours_us:13.0f}")
    print(f"growth {small:,} -> {large:,} entries:")
    for (store, op, n), naive_small in res.naive.items():
        if n == small and (store, op, large) in res.naive:
            ours_x = res.rows[("uniform", store, op, large)][0] / res.rows[("uniform", store, op, small)][0]
            print(f"{store:10} {op:24} ours {ours_x:6.2f}x   naive {res.naive[(store, op, large)] / naive_small:8.1f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes 1k and 10k, 20k ops, 3 repeats")
    parser.add_argument("--sizes", help="comma-separated live-entry counts (default 10000,100000,1000000)")
    parser.add_argument("--ops", type=int, help="timed ops per measurement (default 100000; quick 20000)")
    parser.add_argument("--repeat", type=int, help="runs per measurement, the fastest counts (default 5; quick 3)")
    parser.add_argument("--patterns", default="uniform,hot", help="uniform, hot or both (default)")
    parser.add_argument("--stores", default="key_value,window,session,versioned",
                        help="which stores to measure (default all four)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (
        [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000])
    ops = args.ops or (20_000 if args.quick else 100_000)
    repeat = args.repeat or (3 if args.quick else 5)
    patterns = [p for p in args.patterns.split(",") if p]
    for p in patterns:
        if p not in ("uniform", "hot"):
            parser.error(f"unknown pattern {p!r}; use uniform and/or hot")
    rng = random.Random(args.seed)
    print(f"python {sys.version.split()[0]}; sizes {sizes}; {ops:,} ops per row (build rows: one pass); "
          f"best of {repeat} runs, process CPU time; dict baseline alternating with ours; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    print(f"{'pattern':8} {'store':10} {'op':24} {'entries':>10} {'ours us/op':>10} {'dict us/op':>10} "
          f"{'ours/dict':>8}")
    res = Results(repeat)
    wall = time.perf_counter()
    all_benches = {"key_value": bench_key_value, "window": bench_window, "session": bench_session,
                   "versioned": bench_versioned}
    try:
        benches = [all_benches[name] for name in args.stores.split(",") if name]
    except KeyError as exc:
        parser.error(f"unknown store {exc}; use {', '.join(all_benches)}")
    for bench in benches:  # warm-up, not shown
        bench(1_000, 200, Results(1, quiet=True), random.Random(0), patterns)
    for n in sizes:
        for bench in benches:
            bench(n, ops, res, rng, patterns)
            gc.collect()
        print()

    small, large = sizes[0], sizes[-1]
    worst = {p: growth_table(res, p, small, large) for p in ["build"] + patterns}
    print("\nworst raw growth (ours): " + ", ".join(f"{p} {w:.2f}x" for p, w in worst.items()))
    naive_table(res, small, large)

    if not args.no_memory:
        print(f"\nPeak memory while building {large:,} entries (tracemalloc; keys/values pre-allocated)")
        print(f"{'store':22} {'entries':>9} {'peak MB':>9} {'bytes/entry':>12}")
        fills = {"key_value": fill_key_value, "window": fill_window, "session": fill_session,
                 "versioned": fill_versioned}
        for label, fill in [(n, f) for n, f in fills.items() if all_benches[n] in benches] + [
                ("plain dict (baseline)", fill_naive_dict)]:
            peak, entries = peak_memory(fill, large)
            print(f"{label:22} {entries:>9,} {peak / 1e6:9.1f} {peak / entries:12.0f}", flush=True)
    print(f"\ntotal wall time {time.perf_counter() - wall:.0f} s; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
