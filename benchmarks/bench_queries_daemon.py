"""Interactive queries against the real daemon processing a backlog at full speed (issue 23).

A ``StreamApp`` of the sessions topology (``topologies/sessions.py``) with ``query_port`` set reads a
backlog of ``--records`` clicks (default 400k; ``--keys`` users, default 100k) from a local broker,
three times, each with a fresh application id (so each run processes the whole backlog):

1. alone: records/s from its tasks running to the last record handed to a task;
2. the control: the same next to a process that burns a CPU (the query client's share of this
   2-core machine) and sends nothing;
3. with a client process sending queries for random users (``--concurrency`` in flight) for as long
   as phase 1 took: records/s, and the queries' p50/p99 latency and queries/s. A user not seen yet
   answers 404; every answer is 200 or 404.

Ratios of phase 3 to 1 and to 2 are the figures to read (the machine is shared).

Run from the repository root: ``python -m benchmarks.bench_queries_daemon [--quick] [--records N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import time
import uuid

from benchmarks.bench_queries import busy_neighbour_during, queries_during, summary
from benchmarks.harness import create_topics, produce_batched, run_on_broker

PARTITIONS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def backlog(bootstrap: str, records: int, keys: list[str]) -> str:
    from streamproc.engine.partitioning import partition_for

    topic = f"bench-queries-{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, [topic], PARTITIONS, None, timeout=30.0)
    rng = random.Random(1)
    base = int(time.time() * 1000) - records
    value = json.dumps({"page": "/"}).encode()
    rows = []
    for i in range(records):
        key = keys[rng.randrange(len(keys))].encode()
        rows.append((topic, partition_for(key, PARTITIONS), key, value, base + i))
    await produce_batched(bootstrap, rows)
    return topic


async def process_backlog(bootstrap: str, topic: str, records: int, port: int,
                          running: asyncio.Event | None = None) -> float:
    """Records/s of a fresh app over the backlog (from its tasks running, when ``running`` is set,
    to the last record in)."""
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from topologies import sessions

    app_id = f"bench-queries-{uuid.uuid4().hex[:6]}"
    app = StreamApp(sessions.build(input=topic, output=f"{app_id}-out"),
                    Config(application_id=app_id, bootstrap_servers=bootstrap, query_port=port,
                           progress_log_interval_ms=0))
    runner = asyncio.ensure_future(app.run())
    try:
        while len(app.tasks.running()) < PARTITIONS:
            if runner.done():
                await runner
            await asyncio.sleep(0.005)
        if running is not None:
            running.set()
        t0 = time.perf_counter()
        while app.metrics.value("streamproc_records_in_total") < records:
            if runner.done():
                await runner
            await asyncio.sleep(0.005)
        return records / (time.perf_counter() - t0)
    finally:
        await app.stop()
        await runner


async def main_async(bootstrap: str, records: int, n_keys: int, concurrency: int) -> int:
    from topologies import sessions

    keys = [f"user-{i:07d}" for i in range(n_keys)]
    topic = await backlog(bootstrap, records, keys)
    load = os.getloadavg()
    print(f"{records:,} clicks of {n_keys:,} users over {PARTITIONS} partitions; {concurrency} queries in flight; "
          f"load average {load[0]:.2f} {load[1]:.2f}", flush=True)
    port = free_port()
    alone = await process_backlog(bootstrap, topic, records, port)
    print(f"1. processing alone:          {alone:10,.0f} records/s", flush=True)
    control = await busy_neighbour_during(records / alone, process_backlog(bootstrap, topic, records, port))
    print(f"2. next to a busy process:    {control:10,.0f} records/s  ({control / alone:.2f} of alone)", flush=True)
    seconds = records / alone
    # the client starts once every task runs (before, a query answers 503: partition not running yet)
    running = asyncio.Event()
    app_task = asyncio.ensure_future(process_backlog(bootstrap, topic, records, port, running))
    while not running.is_set():
        if app_task.done():
            await app_task
        await asyncio.sleep(0.005)
    figures, with_queries = await queries_during(port, sessions.STORE, keys, seconds, concurrency, app_task)
    print(f"3. processing with queries:   {with_queries:10,.0f} records/s  ({with_queries / alone:.2f} of alone, "
          f"{with_queries / control:.2f} of the control)", flush=True)
    print(f"   queries while processing:  {summary(figures)}   statuses {dict(sorted(figures['statuses'].items()))}",
          flush=True)
    bad = {s: n for s, n in figures["statuses"].items() if s not in (200, 404)}
    if bad:
        print(f"unexpected statuses: {bad}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="200k records")
    args = ap.parse_args(argv)
    records = 200_000 if args.quick else args.records
    return run_on_broker(main_async, records, args.keys, args.concurrency)


if __name__ == "__main__":
    sys.exit(main())
