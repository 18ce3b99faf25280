"""Records/s through the driver-free Task path for the sessions topology, next to a hand-written floor.

The **task path** is what the daemon runs per batch, minus Kafka: ``Task.process`` over a batch of
raw records (bytes key + JSON bytes value, as aiokafka yields them) -> source deserialisation ->
session-window count (``topologies.sessions``: gap 30 min, grace 5 min, emit on window close) ->
map -> sink serialisation; then, per batch, ``drain_outputs()`` and the change-logging drain of
every store (``drain()``: the serialised, de-duplicated changelog records).

The **floor** is a minimal hand-written Python sessionizer over the same records that produces the
*same output* (checked record by record on every run): decode the key, ``json.loads`` the value,
keep each user's few sessions in a dict of lists, merge a click into the sessions within ``gap``,
drop clicks later than ``stream_time - gap - grace``, and emit each session as JSON bytes once stream
time passes ``end + gap + grace`` (a heap of session ends). That is the least work that gives the
topology's output (docs/semantics.md, "Session windows" with ON_WINDOW_CLOSE); no state store, no changelog, no serde
layer, no operator graph. The floor used for the first figures of issue 5 ("naive floor": one open
session per user, closed by the user's next click, no grace) gives a different output (fewer
records: it never closes a session by stream time); it is still printed, for comparison only.

Data: ``--records`` clicks (default 1M) of ``--users`` users (default 10k) with mostly increasing
timestamps (5% jittered back by up to 2 minutes), so sessions form, extend, merge and close.

Prints records/s and µs/record for each (best of ``--repeat`` runs, CPU time of this process, so
other processes on a shared machine inflate the figures less; the load average is printed), peak
RSS, and the ratio task/floor (target >= 0.30). The generated input records are ``gc.freeze()``-d
before timing (they are harness data that a daemon would not hold; objects the measured code
allocates are collected as usual); ``--no-freeze`` measures without that. It exits non-zero only if the floor's output differs from the task's
(then the comparison would be meaningless); it asserts no speed.

``--released-origins`` (issue 19, item 3) measures instead what keeping each buffered record's
origin costs on the task path of a stream-table join with grace (payments left-joined as of their
time with a versioned rates table, grace 5 s; about every payment passes through the grace buffer
and its change-logged store): the current processor against the one of commit ``4b95a6c`` (before
origins were kept; its source read with ``git show`` into a temporary module, its buffer values
without origins), in the same run, with the ratio.

Usage: ``python -m benchmarks.bench_task_path [--records N] [--users U] [--batch B] [--repeat R] [--quick]
[--released-origins]``.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import random
import resource
import sys
import time
from typing import Any

from streamproc.engine.task import Task
from streamproc.records import Record
from topologies import sessions

MIN = 60_000
GAP = sessions.GAP_MS
GRACE = sessions.GRACE_MS
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


def run_task(records: list[Record], batch: int, keep: list[tuple[Any, Any, int]] | None = None,
             gap: int = GAP, grace: int = GRACE) -> tuple[float, int, int]:
    """The task path: ``(CPU seconds, outputs, changelog records drained)``; the outputs are appended
    to ``keep`` as ``(key, value, timestamp)`` when it is given."""
    task = Task(sessions.build(gap=gap, grace=grace), 0, 0, "bench")
    stores = list(task.stores.values())
    outputs = changelog = 0
    gc.collect()
    start = clock()
    process = task.process
    drain_outputs = task.drain_outputs
    for i in range(0, len(records), batch):
        process("clicks", 0, records[i:i + batch])
        out = drain_outputs()
        outputs += len(out)
        if keep is not None:
            keep += [(o.key, o.value, o.timestamp) for o in out]
        for store in stores:
            changelog += len(store.drain())
    elapsed = clock() - start
    task.close()
    return elapsed, outputs, changelog


def run_floor(records: list[Record], batch: int, keep: list[tuple[Any, Any, int]] | None = None,
              gap: int = GAP, grace: int = GRACE) -> tuple[float, int]:
    """The floor: the least code that gives the sessions topology's output (docs/semantics.md, "Session windows").

    Per user a short list of sessions ``[start, end, clicks]``; a click within ``gap`` of sessions
    merges them (in place when it touches one, the common case); a click whose merged session ends
    before ``close_time = stream_time - gap - grace`` is late and dropped; sessions are emitted once
    ``close_time`` passes their end, in ``(end, start, user)`` order, from a heap of ``(end, start, user)``
    (entries of sessions merged away since are skipped). Sessions stay mergeable until they end
    before ``max end - (gap + grace)`` (the store's retention), as in the task. No stores, no
    changelog, no serde layer, no operator graph.
    """
    retention = gap + grace
    open_sessions: dict[str, list[list[int]]] = {}
    closing: list[tuple[int, int, str]] = []
    outputs = 0
    emitted: list[tuple[Any, Any, int]] = []
    stream_time = max_end = -1
    loads = json.loads
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    push, pop = heapq.heappush, heapq.heappop
    gc.collect()
    start_clock = clock()
    for i in range(0, len(records), batch):
        for r in records[i:i + batch]:
            user = r.key.decode()
            loads(r.value)
            ts = r.timestamp
            if ts > stream_time:
                stream_time = ts
            close_time = stream_time - retention
            cut = max_end - retention
            lst = open_sessions.get(user)
            start = end = ts
            clicks = 1
            found: list[int] | None = None
            nfound = 0
            if lst:
                lo, hi = ts - gap, ts + gap
                for s in lst:
                    if s[1] >= lo and s[0] <= hi and s[1] >= cut:
                        if s[0] < start:
                            start = s[0]
                        if s[1] > end:
                            end = s[1]
                        clicks += s[2]
                        found = s
                        nfound += 1
                if end < close_time:
                    continue                                  # late
            while closing and closing[0][0] < close_time:  # emit closed sessions (state before this click)
                e, s0, u = pop(closing)
                for s in open_sessions[u]:
                    if s[0] == s0 and s[1] == e and e >= cut:
                        emitted.append((u.encode(), encode({"user": u, "start": s0, "end": e, "clicks": s[2],
                                                            "duration_ms": e - s0}).encode(), e))
                        break
            if nfound == 1:
                assert found is not None
                if found[0] != start or found[1] != end:
                    found[0], found[1] = start, end
                    push(closing, (end, start, user))
                found[2] = clicks
            else:
                if lst is None:
                    open_sessions[user] = [[ts, ts, 1]]
                else:                                         # drop expired and merged sessions
                    lst[:] = [s for s in lst if s[1] >= cut and not (s[1] >= ts - gap and s[0] <= ts + gap)]
                    lst.append([start, end, clicks])
                push(closing, (end, start, user))
            if end > max_end:
                max_end = end
        outputs += len(emitted)
        if keep is not None:
            keep += emitted
        emitted = []
    return clock() - start_clock, outputs


def run_naive_floor(records: list[Record], batch: int) -> tuple[float, int]:
    """The floor used before (issue 5's first figures): one open session per user, a session closes
    when the user's next click is more than ``gap`` later. No grace, no merging, no close by stream
    time, so its output differs from the topology's (different count); kept only for comparison."""
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


BEFORE_ORIGINS_COMMIT = "4b95a6c"


def payment_records(n: int, currencies: int = 12, seed: int = 23) -> list[Record]:
    """Rates (1 in 20 records) and payments, ~5 ms apart, 10% of payments up to 3 s late."""
    rng = random.Random(seed)
    keys = [f"C{i:02d}".encode() for i in range(currencies)]
    ts = 1_700_000_000_000
    out = []
    for offset in range(n):
        ts += rng.randint(0, 10)
        key = keys[rng.randrange(currencies)]
        if offset % 20 == 0:
            out.append(Record(key, str(1 + rng.random()).encode(), ts, (), "rates", 0, offset // 20))
        else:
            t = ts - rng.randint(0, 3_000) if rng.random() < 0.1 else ts
            out.append(Record(key, b'{"amount":%d}' % rng.randint(1, 999), t, (), "payments", 0, offset))
    return out


def join_with_grace_topology() -> Any:
    from streamproc import serde
    from streamproc.dsl import StreamsBuilder

    b = StreamsBuilder()
    rates = b.table("rates", key_serde=serde.STRING, value_serde=serde.JSON, name="rates", versioned=3_600_000)
    (b.stream("payments", key_serde=serde.STRING, value_serde=serde.JSON)
     .left_join(rates, lambda p, r: {"amount": p["amount"], "rate": r}, grace=5_000, name="priced")
     .to("priced", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def _old_table_module() -> Any:
    from benchmarks.harness import module_from_source, source_at

    return module_from_source(source_at(BEFORE_ORIGINS_COMMIT, "streamproc/processors/table.py"),
                              f"table_{BEFORE_ORIGINS_COMMIT}", filename=f"<table {BEFORE_ORIGINS_COMMIT}>")


def run_join_task(records: list[Record], batch: int, old: Any = None) -> tuple[float, int, int]:
    """``(CPU seconds, outputs, changelog records)`` of the join-with-grace topology through one Task;
    ``old``: the table module of commit 4b95a6c, swapped into the DSL while the task is built."""
    from streamproc.dsl import join_graph
    from streamproc.engine.task import Task

    def old_processor(*args: Any, timestamped: bool = False, **kwargs: Any) -> Any:
        return old.StreamTableJoinProcessor(*args, **kwargs)  # that version's tables never hold timestamps

    saved = join_graph.StreamTableJoinProcessor, join_graph.buffered_value_serde
    if old is not None:
        join_graph.StreamTableJoinProcessor, join_graph.buffered_value_serde = old_processor, lambda s: s
    try:
        task = Task(join_with_grace_topology(), 0, 0, "bench")
    finally:
        join_graph.StreamTableJoinProcessor, join_graph.buffered_value_serde = saved
    stores = list(task.stores.values())
    outputs = changelog = 0
    gc.collect()
    start = clock()
    i, n = 0, len(records)
    while i < n:                   # a batch is a run of records of one topic (as getmany gives them)
        topic = records[i].topic
        j = i + 1
        while j < n and j - i < batch and records[j].topic == topic:
            j += 1
        task.process(topic, 0, records[i:j])
        outputs += len(task.drain_outputs())
        for store in stores:
            changelog += len(store.drain())
        i = j
    elapsed = clock() - start
    task.close()
    return elapsed, outputs, changelog


def released_origins(args: argparse.Namespace) -> None:
    records = payment_records(args.records)
    old = _old_table_module()
    best = {"origins kept (current)": float("inf"), f"without origins ({BEFORE_ORIGINS_COMMIT})": float("inf")}
    counts = {}
    for _ in range(args.repeat):
        for label, module in zip(best, (None, old)):
            t, outputs, changelog = run_join_task(records, args.batch, module)
            best[label] = min(best[label], t)
            counts[label] = (outputs, changelog)
    n = len(records)
    print(f"stream-table left join with grace 5 s, task path: {n:,} records, batch {args.batch}, "
          f"best of {args.repeat} (CPU time)")
    print(f"{'':34}{'records/s':>12}{'us/record':>12}{'outputs':>10}{'changelog':>11}")
    for label, secs in best.items():
        print(f"{label:34}{n / secs:>12,.0f}{secs / n * 1e6:>12.2f}{counts[label][0]:>10,}{counts[label][1]:>11,}")
    current, before = best.values()
    print(f"ratio with origins / without: {before / current:.3f} (records/s)")
    if len({c[0] for c in counts.values()}) != 1:
        raise SystemExit("the two processors gave different numbers of outputs")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=500, help="records per Task.process call (a getmany batch)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="100k records, 2 runs")
    p.add_argument("--no-check", action="store_true", help="skip the untimed output comparison run")
    p.add_argument("--no-freeze", action="store_true",
                   help="do not gc.freeze() the generated input records (the collector then walks them too)")
    p.add_argument("--released-origins", action="store_true",
                   help="measure the cost of keeping buffered records' origins (stream-table join with grace)")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.repeat = 100_000, 2
    if args.released_origins:
        released_origins(args)
        return

    records = make_records(args.records, args.users)
    if not args.no_freeze:  # the input list is harness data: keep the collector from walking it
        gc.collect()
        gc.freeze()
    load_before = os.getloadavg()
    same = None
    if not args.no_check:  # an untimed run of each, compared record by record
        task_keep: list[tuple[Any, Any, int]] = []
        floor_keep: list[tuple[Any, Any, int]] = []
        run_task(records, args.batch, task_keep)
        run_floor(records, args.batch, floor_keep)
        same = task_keep == floor_keep
        del task_keep, floor_keep
    task_best = floor_best = naive_best = float("inf")
    outputs = changelog = floor_outputs = naive_outputs = 0
    for _ in range(args.repeat):
        t, outputs, changelog = run_task(records, args.batch)
        task_best = min(task_best, t)
        f, floor_outputs = run_floor(records, args.batch)
        floor_best = min(floor_best, f)
        nf, naive_outputs = run_naive_floor(records, args.batch)
        naive_best = min(naive_best, nf)
    n = len(records)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"sessions topology, task path vs hand-written sessionizer: {n:,} records, {args.users:,} users, "
          f"batch {args.batch}, best of {args.repeat} (CPU time)")
    print(f"{'':24}{'records/s':>12}{'us/record':>12}{'outputs':>10}")
    print(f"{'task path':24}{n / task_best:>12,.0f}{task_best / n * 1e6:>12.2f}{outputs:>10,}"
          f"   (+ {changelog:,} changelog records drained)")
    print(f"{'floor (hand-written)':24}{n / floor_best:>12,.0f}{floor_best / n * 1e6:>12.2f}{floor_outputs:>10,}"
          f"   outputs identical to the task's: {'not checked' if same is None else 'yes' if same else 'NO'}")
    print(f"{'naive floor (previous)':24}{n / naive_best:>12,.0f}{naive_best / n * 1e6:>12.2f}{naive_outputs:>10,}"
          f"   (not equivalent: no grace/merge/close time)")
    print(f"ratio task/floor: {floor_best / task_best:.2f} (target >= 0.30); "
          f"task/naive floor: {naive_best / task_best:.2f}")
    print(f"peak RSS: {peak_mb:,.0f} MB (process, including the input records)")
    load_after = os.getloadavg()
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f} "
          f"on {os.cpu_count()} cores; input records {'not ' if args.no_freeze else ''}gc-frozen")
    sys.stdout.flush()
    if same is False:
        raise SystemExit("the floor's output differs from the task path's: the comparison is not valid")


if __name__ == "__main__":
    main()
