"""Kafka side of the harness (aiokafka, the project's venv): topics, input, watching a group, output."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from benchmarks import harness

from .common import Click

#: The input's event times are from 2023 (deterministic data); without this the broker's time
#: retention (7 days) deletes the records minutes after they are written.
TOPIC_CONFIGS = {"retention.ms": "-1"}


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """``name`` with ``partitions`` partitions and :data:`TOPIC_CONFIGS`, waited for."""
    await harness.create_topics(bootstrap, [name], partitions, TOPIC_CONFIGS)


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """``{partition: end offset}`` of ``topic``."""
    return {tp.partition: off for tp, off in (await harness.end_offsets(bootstrap, [topic], partitions)).items()}


async def produce_all(bootstrap: str, topic: str, clicks: Sequence[Click]) -> None:
    """Write ``clicks`` in order, each to its own partition, as whole producer batches."""
    await harness.produce_batched(bootstrap, ((topic, c.partition, c.key, c.value, c.ts) for c in clicks))


@dataclass
class Progress:
    """What :func:`watch_group` saw: when the group became stable (ready) and when it was done."""

    ready_at: float | None = None
    done_at: float | None = None
    polls: int = 0
    last_committed: dict[int, int] = field(default_factory=dict)
    last_outputs: int = 0
    trace: list[tuple[float, int]] = field(default_factory=list)  # (perf_counter, committed input records)

    def second_half_rate(self) -> float | None:
        """Records/s over the second half of the input (from the first poll that saw half of it
        committed to the end): the steady-state rate, without startup and warm-up."""
        if not self.trace or self.done_at is None:
            return None
        total = self.trace[-1][1]
        for t, n in self.trace:
            if n >= total / 2 and self.done_at > t:
                return (total - n) / (self.done_at - t) if total > n else None
        return None


async def watch_group(bootstrap: str, group: str, source: str, ends: dict[int, int], output: str,
                      partitions: int, min_outputs: int, progress: Progress, *, alive: Any,
                      on_ready: Any = None, interval: float = 0.05, timeout: float = 600.0) -> Progress:
    """Poll until the group ``group`` is Stable (``ready_at``, then ``on_ready()``), then until it has
    committed every offset of ``ends`` on ``source`` and ``output`` holds at least ``min_outputs``
    records (``done_at``). ``alive()`` returning False (the peer exited) raises."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    tail = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await tail.start()
    out_tps = [TopicPartition(output, p) for p in range(partitions)]
    want = {p: e for p, e in ends.items() if e}
    deadline = time.monotonic() + timeout
    try:
        coordinator = None
        while True:
            progress.polls += 1
            if not alive():
                raise RuntimeError(f"peer process of group {group} exited before it was done")
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group}: not done after {timeout:.0f} s (committed "
                                   f"{progress.last_committed}, want {want}; outputs {progress.last_outputs})")
            try:
                if coordinator is None:
                    coordinator = await admin.find_coordinator(group)
                if progress.ready_at is None:
                    (resp,) = await admin.describe_consumer_groups([group], group_coordinator_id=coordinator)
                    for g in resp.groups:
                        if g[1] == group and g[2] == "Stable" and g[5]:
                            progress.ready_at = time.perf_counter()
                            if on_ready is not None:
                                on_ready()
                committed = (await admin.list_consumer_group_offsets(group, group_coordinator_id=coordinator)
                             if progress.ready_at is not None else {})
            except KafkaError as exc:  # e.g. the coordinator of a fresh broker is not there yet
                if not getattr(exc, "retriable", False):
                    raise
                await asyncio.sleep(interval)
                continue
            if progress.ready_at is not None:
                progress.last_committed = {tp.partition: om.offset for tp, om in committed.items()
                                           if tp.topic == source}
                progress.trace.append((time.perf_counter(), sum(max(0, o) for o in progress.last_committed.values())))
                if all(progress.last_committed.get(p, -1) >= e for p, e in want.items()):
                    outs = await tail.end_offsets(out_tps)
                    progress.last_outputs = sum(outs.values())
                    if progress.last_outputs >= min_outputs:
                        progress.done_at = time.perf_counter()
                        return progress
            await asyncio.sleep(interval)
    finally:
        await tail.stop()
        await admin.close()


async def watch_output(bootstrap: str, output: str, partitions: int, min_outputs: int, progress: Progress, *,
                       alive: Any, ready: Any, on_ready: Any = None, interval: float = 0.05,
                       timeout: float = 600.0) -> Progress:
    """For a peer without a consumer group: poll ``ready()`` (None, or the ``time.time()`` at which
    the peer saw its first record) and set ``ready_at`` (on the ``perf_counter`` clock) and call
    ``on_ready()`` once it answers; then poll until ``output`` holds at least ``min_outputs``
    records (``done_at``). A peer that exits before both happened raises (one that exits after
    writing everything, as Bytewax does at the end of its input, is done)."""
    tail = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await tail.start()
    out_tps = [TopicPartition(output, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout
    try:
        while True:
            progress.polls += 1
            running = alive()
            if progress.ready_at is None:
                at = ready()
                if at is not None:
                    progress.ready_at = time.perf_counter() - max(0.0, time.time() - at)
                    if on_ready is not None:
                        on_ready()
            if progress.ready_at is not None:
                outs = await tail.end_offsets(out_tps)
                progress.last_outputs = sum(outs.values())
                if progress.last_outputs >= min_outputs:
                    progress.done_at = time.perf_counter()
                    return progress
            if not running:
                raise RuntimeError(f"peer exited with {progress.last_outputs} of {min_outputs} output records")
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done after {timeout:.0f} s (outputs {progress.last_outputs} of {min_outputs})")
            await asyncio.sleep(interval)
    finally:
        await tail.stop()


async def read_topic(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes | None, int]]:
    """Every record of ``topic`` as ``(key, value, timestamp)`` (reads up to the end offsets)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    out: list[tuple[bytes | None, bytes | None, int]] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        remaining = {tp for tp, e in ends.items() if e > 0}
        while remaining:
            for tp, records in (await consumer.getmany(timeout_ms=500, max_records=20_000)).items():
                out.extend((r.key, r.value, r.timestamp) for r in records)
                if records and records[-1].offset + 1 >= ends[tp]:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()


class OutputTail:
    """Reads a topic from the beginning while a run goes on and stamps each record with the
    wall-clock time (ms) it was read: ``records`` = ``[(key, value, timestamp, read_ms)]``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.records: list[tuple[bytes | None, bytes | None, int, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, fetch_max_wait_ms=100,
                                          auto_offset_reset="earliest")
        await self._consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_beginning(*tps)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            batch = await self._consumer.getmany(timeout_ms=50, max_records=10_000)
            now = time.time() * 1000
            for records in batch.values():
                self.records.extend((r.key, r.value, r.timestamp, now) for r in records)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self._consumer.stop()


async def produce_at_rate(bootstrap: str, topic: str, rate: float, seconds: float, users: int,
                          partitions: int, partitioner: Any, seed: int = 11) -> list[Click]:
    """Clicks of ``users`` users at ``rate`` records/s for ``seconds``, each stamped with the
    wall-clock ms it was handed to the producer (event time = produce time). Returns them in order."""
    import json
    import random

    rng = random.Random(seed)
    keys = [f"user-{i:06d}".encode() for i in range(users)]
    part = {k: partitioner(k, partitions) for k in keys}
    pages = [json.dumps({"page": f"/p{i}", "ref": "search"}).encode() for i in range(50)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, acks="all")
    await producer.start()
    sent: list[Click] = []
    futures = []
    try:
        t0 = time.perf_counter()
        total = int(rate * seconds)
        while len(sent) < total:
            due = min(total, int(rate * (time.perf_counter() - t0)) + 1)
            while len(sent) < due:
                key = keys[rng.randrange(users)]
                c = Click(key, pages[rng.randrange(50)], int(time.time() * 1000), part[key])
                futures.append(await producer.send(topic, key=c.key, value=c.value, partition=c.partition,
                                                   timestamp_ms=c.ts))
                sent.append(c)
            await asyncio.sleep(0.005)
        await asyncio.gather(*futures)
        return sent
    finally:
        await producer.stop()


async def produce_flush(bootstrap: str, topic: str, flush: Sequence[Click]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, key=c.key, value=c.value, partition=c.partition,
                                                   timestamp_ms=c.ts) for c in flush])
    finally:
        await producer.stop()
