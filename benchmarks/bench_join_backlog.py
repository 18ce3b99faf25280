"""The daemon over a join backlog: ``topologies.pageviews`` on records already in Kafka.

Views and ad clicks (``--records`` in total, half each, string keys of 2000 users, JSON values) are
produced to two 8-partition topics before anything runs, their timestamps interleaved (a view
every 100 ms of event time, a click 50 ms after it): the backlog a daemon meets after a deploy or
an outage. Each phase runs in its own process (CPU time and peak RSS per phase), on uvloop:

* **passthrough** (the ceiling): a consumer of both topics re-sending every record unchanged
  through ``create_batch``/``send_batch``, offsets committed after the sends are acknowledged;
* **daemon, bound N**: ``StreamApp`` running the page-views topology (a windowed left join of views
  with clicks, and views per page per minute through a repartition topic) with
  ``buffered_records_per_partition=N``: each task merges its two input partitions in timestamp
  order, so nothing is dropped as late (checked: the late-drop and enforced-processing counters
  are printed and must be 0).

The clock runs from "the group has its partitions" to "every input offset is committed". Printed:
records/s, the ratio to the passthrough, CPU µs per record, peak RSS, the buffer bound.

Broker: ``--bootstrap`` or ``$KAFKA_BOOTSTRAP_SERVERS``; otherwise a local one is started with
``scripts/kafka/localkafka.py`` and stopped at the end. ``--quick``: 100 000 records.

Run from the repository root: ``python -m benchmarks.bench_join_backlog [--quick] [--bounds 1000,10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks.harness import (
    Row,
    app_running,
    broker,
    create_topics,
    end_offsets,
    measured,
    passthrough_until,
    produce_batched,
    run_in_child,
)

PARTITIONS = 8
USERS = 2_000






def _rows(views: str, clicks: str, n: int) -> Iterator[Row]:
    """``n`` records, half views half clicks, event times interleaved; each topic in its own
    batches (the broker holds them apart)."""
    from streamproc.engine.partitioning import partition_for

    rng = random.Random(3)
    half = n // 2
    base = (int(time.time()) - 3_600) * 1_000 - half * 100
    for i in range(half):
        key = f"user-{rng.randrange(USERS):05d}".encode()
        yield views, partition_for(key, PARTITIONS), key, json.dumps({"page": f"/p/{rng.randrange(200)}"}).encode(), \
            base + i * 100
    for i in range(half):
        key = f"user-{rng.randrange(USERS):05d}".encode()
        yield clicks, partition_for(key, PARTITIONS), key, json.dumps({"ad": f"ad-{rng.randrange(50)}"}).encode(), \
            base + i * 100 + 50


async def _produce(bootstrap: str, views: str, clicks: str, n: int) -> dict[Any, int]:
    """Writes :func:`_rows`; returns the end offsets ``{TopicPartition: end}``."""
    await produce_batched(bootstrap, _rows(views, clicks, n))
    return await end_offsets(bootstrap, [views, clicks], PARTITIONS)


async def _passthrough(bootstrap: str, views: str, clicks: str, ends: dict[Any, int], bound: int) -> dict[str, Any]:
    return {"elapsed": await passthrough_until(bootstrap, [views, clicks], ends, PARTITIONS, name="bench-join-pass")}


async def _daemon(bootstrap: str, views: str, clicks: str, ends: dict[Any, int], bound: int) -> dict[str, Any]:
    from streamproc.config import Config
    from topologies import pageviews

    tag = uuid.uuid4().hex[:8]
    topology = pageviews.build(views=views, clicks=clicks, joined=f"bench-joined-{tag}", counts=f"bench-counts-{tag}")
    config = Config(application_id=f"bench-join-{tag}", bootstrap_servers=bootstrap, commit_interval_ms=500,
                    log_level="WARNING", buffered_records_per_partition=bound)
    want = {tp: e for tp, e in ends.items() if e}
    async with app_running(topology, config, 2 * PARTITIONS) as run:
        app = run.app
        started = time.perf_counter()
        await run.until(lambda: all(app.committer.committed.get(tp, 0) >= e for tp, e in want.items()), 0.01)
        elapsed = time.perf_counter() - started
        return {"elapsed": elapsed,
                "late": app.metrics.value("streamproc_dropped_records_total", reason="late"),
                "enforced": app.metrics.value("streamproc_enforced_processing_total"),
                "joined": app.metrics.value("streamproc_records_out_total", topic=f"bench-joined-{tag}")}


def _child(phase: str, args: tuple[Any, ...], out: Any) -> None:
    import uvloop

    fn = {"passthrough": _passthrough, "daemon": _daemon}[phase]
    out.put(measured(lambda: uvloop.run(fn(*args))))


def run_phase(phase: str, *args: Any) -> dict[str, Any]:
    return run_in_child(_child, phase, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="views + clicks (default 1M)")
    ap.add_argument("--quick", action="store_true", help="100 000 records (a smoke run)")
    ap.add_argument("--bounds", default="1000,10000",
                    help="buffered_records_per_partition values to run the daemon with (comma separated)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args()
    if args.quick:
        args.records = 100_000
    bounds = [int(b) for b in args.bounds.split(",")]
    with broker(args.bootstrap) as bootstrap:
        tag = uuid.uuid4().hex[:8]
        views, clicks = f"bench-views-{tag}", f"bench-clicks-{tag}"
        asyncio.run(create_topics(bootstrap, [views, clicks], PARTITIONS))
        t = time.perf_counter()
        ends = asyncio.run(_produce(bootstrap, views, clicks, args.records))
        n = sum(ends.values())
        print(f"backlog: {n:,} records ({n // 2:,} views, {n - n // 2:,} clicks of {USERS} users, timestamps "
              f"interleaved) on {PARTITIONS} partitions each, produced in {time.perf_counter() - t:.1f} s")
        rows = [("aiokafka passthrough (ceiling)", run_phase("passthrough", bootstrap, views, clicks, ends, 0))]
        for bound in bounds:
            rows.append((f"daemon pageviews, bound {bound}", run_phase("daemon", bootstrap, views, clicks, ends, bound)))
        base = rows[0][1]["elapsed"]
        print(f"{'phase':34} {'records/s':>11} {'ratio':>6} {'CPU us/rec':>11} {'peak RSS MB':>12} "
              f"{'late':>5} {'enforced':>9} {'joined':>9}")
        for name, r in rows:
            print(f"{name:34} {n / r['elapsed']:11,.0f} {base / r['elapsed']:6.2f} {1e6 * r['cpu'] / n:11.1f} "
                  f"{r['rss_mb']:12.1f} {r.get('late', 0):5.0f} {r.get('enforced', 0):9.0f} {r.get('joined', 0):9.0f}")


if __name__ == "__main__":
    main()
