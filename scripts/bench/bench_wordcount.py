#!/usr/bin/env python3
"""Word count (``topologies.wordcount``): sentences/s in-process (Task alone) and on the daemon, with
the daemon's ratio to an aiokafka passthrough over the same input; peak RSS per phase.

Sentences (``--sentences``, default 1M; 1-8 words of a 5000-word vocabulary, string keys or none,
timestamps 10 ms apart) are generated once. Each phase runs in its own process (CPU time and peak
RSS per phase), on uvloop:

Peak RSS includes the phase's own copy of the input where it has one (task: 1M sentences and their
records). Phases:

* **task**: the two sub-topologies' ``Task`` s (split + repartition sink, then count + sink) called
  directly in batches of 5000, the repartition records handed from one to the other in memory,
  outputs and changelogs drained after each batch; no Kafka;
* **passthrough** (the ceiling): the sentences already on a 4-partition topic, a consumer re-sending
  each record unchanged (``create_batch``/``send_batch``), offsets committed after the acks;
* **daemon**: ``StreamApp`` running word count over the same backlog (4 partitions: the input and
  the repartition topic ``words``), until one output record per word occurrence has been produced.

Broker: ``--bootstrap`` or ``$KAFKA_BOOTSTRAP_SERVERS``; otherwise a local one is started with
``scripts/kafka/localkafka.py`` and stopped at the end. ``--quick``: 100 000 sentences.
"""

from __future__ import annotations

import argparse
import asyncio
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

PARTITIONS = 4
VOCABULARY = 5_000
BATCH = 5_000




def sentences(n: int) -> list[tuple[bytes | None, bytes, int]]:
    """``(key bytes or None, sentence bytes, timestamp)``."""
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(VOCABULARY)]
    base = (int(time.time()) - 3_600) * 1_000 - n * 10
    out = []
    for i in range(n):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        key = None if rng.random() < 0.2 else f"doc-{rng.randrange(1000)}".encode()
        out.append((key, text.encode(), base + i * 10))
    return out


def _task(n: int) -> dict[str, Any]:
    from streamproc.engine.task import Task
    from streamproc.records import Record
    from topologies import wordcount

    data = sentences(n)
    topology = wordcount.build()
    split, count = Task(topology, 0, 0, "bench"), Task(topology, 1, 0, "bench")
    (repartition,) = count.source_topics
    started = time.perf_counter()
    out = offset = 0
    for i in range(0, n, BATCH):
        split.process(wordcount.INPUT, 0, [Record(k, v, ts, (), wordcount.INPUT, 0, i + j)
                                           for j, (k, v, ts) in enumerate(data[i:i + BATCH])])
        words = split.drain_outputs()
        split.drain_changelogs()
        count.process(repartition, 0, [Record(r.key, r.value, r.timestamp, (), repartition, 0, offset + j)
                                       for j, r in enumerate(words)])
        offset += len(words)
        out += len(count.drain_outputs())
        count.drain_changelogs()
    return {"elapsed": time.perf_counter() - started, "words": out}




async def _produce(bootstrap: str, topic: str, n: int) -> dict[str, int]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streamproc.engine.partitioning import partition_for

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=512 * 1024, acks="all")
    await producer.start()
    try:
        batches: dict[int, Any] = {}
        futures = []
        for i, (key, value, ts) in enumerate(sentences(n)):
            p = partition_for(key, PARTITIONS) if key is not None else i % PARTITIONS
            b = batches.get(p)
            if b is None:
                b = batches[p] = producer.create_batch()
            if b.append(key=key, value=value, timestamp=ts) is None:
                futures.append(await producer.send_batch(b, topic, partition=p))
                b = batches[p] = producer.create_batch()
                b.append(key=key, value=value, timestamp=ts)
        for p, b in batches.items():
            futures.append(await producer.send_batch(b, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {str(tp.partition): off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


async def _passthrough(bootstrap: str, topic: str, ends: dict[str, int], n_words: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    sink = f"bench-wc-pass-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [sink], PARTITIONS)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"bench-wc-{uuid.uuid4().hex[:8]}",
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                max_partition_fetch_bytes=4 * 1024 * 1024, fetch_max_wait_ms=100)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                max_batch_size=512 * 1024)
    await producer.start()
    await consumer.start()
    want = {TopicPartition(topic, int(p)): e for p, e in ends.items() if e}
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


async def _daemon(bootstrap: str, topic: str, ends: dict[str, int], n_words: int) -> dict[str, Any]:
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from topologies import wordcount

    tag = uuid.uuid4().hex[:8]
    output = f"bench-wc-out-{tag}"
    app = StreamApp(wordcount.build(input=topic, output=output),
                    Config(application_id=f"bench-wc-{tag}", bootstrap_servers=bootstrap, commit_interval_ms=500,
                           log_level="WARNING"))
    runner = asyncio.create_task(app.run())
    try:
        while len(app.tasks.running()) < 2 * PARTITIONS:
            if runner.done():
                await runner
            await asyncio.sleep(0.005)
        started = time.perf_counter()
        while app.metrics.value("streamproc_records_out_total", topic=output) < n_words:
            if runner.done():
                await runner
            await asyncio.sleep(0.01)
        return {"elapsed": time.perf_counter() - started}
    finally:
        await app.stop()
        await runner


def _child(phase: str, args: tuple[Any, ...], out: Any) -> None:
    import uvloop

    def run() -> dict[str, Any]:
        if phase == "task":
            return _task(*args)
        if phase == "produce":  # in a child too: the parent stays small (ru_maxrss survives fork + exec)
            return {"ends": asyncio.run(_produce(*args))}
        return dict(uvloop.run({"passthrough": _passthrough, "daemon": _daemon}[phase](*args)))

    out.put(measured(run))


def run_phase(phase: str, *args: Any) -> dict[str, Any]:
    return run_in_child(_child, phase, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=1_000_000, help="sentences (default 1M)")
    ap.add_argument("--quick", action="store_true", help="100 000 sentences (a smoke run)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args()
    n = 100_000 if args.quick else args.sentences
    task = run_phase("task", n)
    n_words = task["words"]
    print(f"{n:,} sentences, {n_words:,} words (one output record each)")
    rows = [("task (in-process, no Kafka)", task)]
    handle = None
    bootstrap = args.bootstrap
    if not bootstrap:
        handle = localkafka().start_single(timeout=180)
        bootstrap = handle.bootstrap
    try:
        topic = f"bench-sentences-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topics(bootstrap, [topic], PARTITIONS))
        ends = run_phase("produce", bootstrap, topic, n)["ends"]
        assert sum(ends.values()) == n, ends
        rows.append(("aiokafka passthrough (ceiling)", run_phase("passthrough", bootstrap, topic, ends, n_words)))
        rows.append(("daemon word count", run_phase("daemon", bootstrap, topic, ends, n_words)))
    finally:
        if handle is not None:
            handle.stop()
    base = rows[1][1]["elapsed"]
    print(f"{'phase':32} {'sentences/s':>12} {'words/s':>10} {'vs passthrough':>15} {'CPU us/sentence':>16} "
          f"{'peak RSS MB':>12}")
    for name, r in rows:
        ratio = f"{base / r['elapsed']:.2f}" if name.startswith("daemon") else "-"
        print(f"{name:32} {n / r['elapsed']:12,.0f} {n_words / r['elapsed']:10,.0f} {ratio:>15} "
              f"{1e6 * r['cpu'] / n:16.1f} {r['rss_mb']:12.1f}")


if __name__ == "__main__":
    main()
