#!/usr/bin/env python3
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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "bench"))

from phases import create_topics, localkafka, measured, run_in_child

PARTITIONS = 8
USERS = 2_000






async def _produce(bootstrap: str, views: str, clicks: str, n: int) -> dict[str, int]:
    """``n`` records, half views half clicks, event times interleaved; returns the end offsets
    (``"topic:partition" -> end``)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streamproc.engine.partitioning import partition_for

    rng = random.Random(3)
    half = n // 2
    base = (int(time.time()) - 3_600) * 1_000 - half * 100
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=512 * 1024, acks="all")
    await producer.start()
    try:
        batches: dict[tuple[str, int], Any] = {}
        futures = []

        async def add(topic: str, key: bytes, value: bytes, ts: int) -> None:
            p = partition_for(key, PARTITIONS)
            b = batches.get((topic, p))
            if b is None:
                b = batches[(topic, p)] = producer.create_batch()
            if b.append(key=key, value=value, timestamp=ts) is None:
                futures.append(await producer.send_batch(b, topic, partition=p))
                b = batches[(topic, p)] = producer.create_batch()
                b.append(key=key, value=value, timestamp=ts)

        for i in range(half):  # each topic in its own batches: the broker holds them apart
            key = f"user-{rng.randrange(USERS):05d}".encode()
            await add(views, key, json.dumps({"page": f"/p/{rng.randrange(200)}"}).encode(), base + i * 100)
        for i in range(half):
            key = f"user-{rng.randrange(USERS):05d}".encode()
            await add(clicks, key, json.dumps({"ad": f"ad-{rng.randrange(50)}"}).encode(), base + i * 100 + 50)
        for (topic, p), b in batches.items():
            futures.append(await producer.send_batch(b, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in (views, clicks) for p in range(PARTITIONS)]
        return {f"{tp.topic}:{tp.partition}": off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


def _ends(ends: dict[str, int]) -> dict[Any, int]:
    from aiokafka import TopicPartition

    out = {}
    for key, end in ends.items():
        topic, _, p = key.rpartition(":")
        if end:
            out[TopicPartition(topic, int(p))] = end
    return out


async def _passthrough(bootstrap: str, views: str, clicks: str, ends: dict[str, int], bound: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    sink = f"bench-join-pass-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [sink], PARTITIONS)
    consumer = AIOKafkaConsumer(views, clicks, bootstrap_servers=bootstrap, group_id=f"bench-pass-{uuid.uuid4().hex[:8]}",
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                max_partition_fetch_bytes=4 * 1024 * 1024, fetch_max_wait_ms=100)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                max_batch_size=512 * 1024)
    await producer.start()
    await consumer.start()
    want = _ends(ends)
    try:
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=100)
        started = time.perf_counter()
        done: dict[Any, int] = {}
        while any(done.get(tp, 0) < e for tp, e in want.items()):
            batch = await consumer.getmany(timeout_ms=100, max_records=5000)
            futures = []
            offsets = {}
            for tp, records in batch.items():
                b = producer.create_batch()
                for r in records:
                    if b.append(key=r.key, value=r.value, timestamp=r.timestamp, headers=[]) is None:
                        futures.append(await producer.send_batch(b, sink, partition=tp.partition))
                        b = producer.create_batch()
                        b.append(key=r.key, value=r.value, timestamp=r.timestamp, headers=[])
                futures.append(await producer.send_batch(b, sink, partition=tp.partition))
                offsets[tp] = records[-1].offset + 1
            if futures:
                await asyncio.gather(*futures)
                await consumer.commit(offsets)
                done.update(offsets)
        return {"elapsed": time.perf_counter() - started}
    finally:
        await consumer.stop()
        await producer.stop()


async def _daemon(bootstrap: str, views: str, clicks: str, ends: dict[str, int], bound: int) -> dict[str, Any]:
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from topologies import pageviews

    tag = uuid.uuid4().hex[:8]
    topology = pageviews.build(views=views, clicks=clicks, joined=f"bench-joined-{tag}", counts=f"bench-counts-{tag}")
    app = StreamApp(topology, Config(application_id=f"bench-join-{tag}", bootstrap_servers=bootstrap,
                                     commit_interval_ms=500, log_level="WARNING",
                                     buffered_records_per_partition=bound))
    runner = asyncio.create_task(app.run())
    want = _ends(ends)
    try:
        while len(app.tasks.running()) < 2 * PARTITIONS:
            if runner.done():
                await runner
            await asyncio.sleep(0.005)
        started = time.perf_counter()
        while any(app.committer.committed.get(tp, 0) < e for tp, e in want.items()):
            if runner.done():
                await runner
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - started
        return {"elapsed": elapsed,
                "late": app.metrics.value("streamproc_dropped_records_total", reason="late"),
                "enforced": app.metrics.value("streamproc_enforced_processing_total"),
                "joined": app.metrics.value("streamproc_records_out_total", topic=f"bench-joined-{tag}")}
    finally:
        await app.stop()
        await runner


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
    handle = None
    bootstrap = args.bootstrap
    if not bootstrap:
        handle = localkafka().start_single(timeout=180)
        bootstrap = handle.bootstrap
    try:
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
    finally:
        if handle is not None:
            handle.stop()


if __name__ == "__main__":
    main()
