#!/usr/bin/env python
"""Records/s through the driver-free Task path for the sessions topology, next to a hand-written floor.

The **task path** is what the daemon runs per batch, minus Kafka: ``Task.process`` over a batch of
raw records (bytes key + JSON bytes value, as aiokafka yields them) -> source deserialisation ->
session-window count (``topologies.sessions``: gap 30 min, grace 5 min, emit on window close) ->
map -> sink serialisation; then, per batch, ``drain_outputs()`` and the change-logging drain of
every store (``drain()``: the serialised, de-duplicated changelog records).

The **floor** is a minimal hand-written Python sessionizer over the same records: decode the key,
``json.loads`` the value, keep one open session per user in a dict, and when a click is more than
``gap`` after the user's session, emit the closed session as JSON bytes. No grace, no merging of
out-of-order sessions, no state store, no changelog: the least work that yields session counts.

Data: ``--records`` clicks (default 1M) of ``--users`` users (default 10k) with mostly increasing
timestamps (5% jittered back by up to 2 minutes), so sessions form, extend, merge and close.

Prints records/s and µs/record for both (best of ``--repeat`` runs, CPU time of this process, so
other processes on a shared machine do not inflate the figures), peak RSS, and the ratio
task/floor (target >= 0.30). It asserts nothing.

Usage: ``python scripts/bench/bench_task_path.py [--records N] [--users U] [--batch B] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import time
from typing import Any

from streamproc.records import Record
from streamproc.runtime.task import Task
from topologies import sessions

MIN = 60_000
GAP = sessions.GAP_MS
clock = time.process_time


def make_records(n: int, users: int, seed: int = 7) -> list[Record]:
    rng = random.Random(seed)
    pages = [json.dumps({"page": f"/p{i}", "ref": "search"}).encode() for i in range(50)]
    user_keys = [f"user-{i:06d}".encode() for i in range(users)]
    ts = 1_700_000_000_000
    out = []
    for offset in range(n):
        ts += rng.randint(0, 400)          # ~10k users x one click per ~40 min each on average
        t = ts - rng.randint(0, 2 * MIN) if rng.random() < 0.05 else ts
        out.append(Record(user_keys[rng.randrange(users)], pages[rng.randrange(50)], t, (), "clicks", 0, offset))
    return out


def run_task(records: list[Record], batch: int) -> tuple[float, int, int]:
    task = Task(sessions.build(), 0, 0, "bench")
    stores = list(task.stores.values())
    outputs = changelog = 0
    gc.collect()
    start = clock()
    process = task.process
    for i in range(0, len(records), batch):
        process("clicks", 0, records[i:i + batch])
        outputs += len(task.drain_outputs())
        for store in stores:
            changelog += len(store.drain())
    elapsed = clock() - start
    task.close()
    return elapsed, outputs, changelog


def run_floor(records: list[Record], batch: int) -> tuple[float, int]:
    open_sessions: dict[str, list[Any]] = {}
    emitted: list[tuple[bytes, bytes, int]] = []
    outputs = 0
    loads, dumps = json.loads, json.dumps
    gc.collect()
    start = clock()
    for i in range(0, len(records), batch):
        for r in records[i:i + batch]:
            user = r.key.decode()
            loads(r.value)
            ts = r.timestamp
            s = open_sessions.get(user)
            if s is None:
                open_sessions[user] = [ts, ts, 1]
            elif ts - s[1] > GAP:
                emitted.append((r.key, dumps({"user": user, "start": s[0], "end": s[1], "clicks": s[2],
                                              "duration_ms": s[1] - s[0]}).encode(), s[1]))
                open_sessions[user] = [ts, ts, 1]
            else:
                if ts > s[1]:
                    s[1] = ts
                elif ts < s[0]:
                    s[0] = ts
                s[2] += 1
        outputs += len(emitted)
        emitted = []
    return clock() - start, outputs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=500, help="records per Task.process call (a getmany batch)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)

    records = make_records(args.records, args.users)
    task_best = floor_best = float("inf")
    outputs = changelog = floor_outputs = 0
    for _ in range(args.repeat):
        t, outputs, changelog = run_task(records, args.batch)
        task_best = min(task_best, t)
        f, floor_outputs = run_floor(records, args.batch)
        floor_best = min(floor_best, f)
    n = len(records)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"sessions topology, task path vs hand-written sessionizer: {n:,} records, {args.users:,} users, "
          f"batch {args.batch}, best of {args.repeat} (CPU time)")
    print(f"{'':24}{'records/s':>12}{'us/record':>12}{'outputs':>10}")
    print(f"{'task path':24}{n / task_best:>12,.0f}{task_best / n * 1e6:>12.2f}{outputs:>10,}"
          f"   (+ {changelog:,} changelog records drained)")
    print(f"{'floor (hand-written)':24}{n / floor_best:>12,.0f}{floor_best / n * 1e6:>12.2f}{floor_outputs:>10,}")
    print(f"ratio task/floor: {floor_best / task_best:.2f} (target >= 0.30)")
    print(f"peak RSS: {peak_mb:,.0f} MB (process, including the input records)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
