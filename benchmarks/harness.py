"""The shared harness of the Kafka benchmarks: a broker, topics, input, the aiokafka passthrough
baseline, the daemon timed in-process, and a phase measured in its own process.

* :func:`broker`: ``--bootstrap`` / ``$KAFKA_BOOTSTRAP_SERVERS`` when given, otherwise a local
  single broker (:mod:`scripts.kafka.localkafka`) started for the ``with`` block and stopped after.
* :func:`create_topics`: topics created and waited for (every partition described with a leader).
* :class:`BatchSender` / :func:`produce_batched`: records written in order as whole producer
  batches, one open batch per (topic, partition) (``create_batch``/``send_batch``, the producer path
  the daemon uses); :func:`end_offsets`.
* The passthrough (the ceiling every daemon figure is set against): :func:`passthrough_clients`
  (consumer and producer with the shared settings), :func:`passthrough_round` (one ``getmany``
  batch re-sent unchanged, offsets committed once the sends are acknowledged) and
  :func:`passthrough_until` (rounds until given end offsets are committed, timed).
* :func:`app_running`: a ``StreamApp`` running in this loop, its tasks started, stopped on exit.
* :func:`measured` / :func:`run_in_child`: a phase's result with the CPU seconds it took and the
  peak RSS of its process, run in a spawned child (so CPU and RSS are per phase).
* :func:`source_at` / :func:`module_from_source`: an older version of a module (``git show``),
  loaded next to the current one, for the benchmarks that compare the two in one run.

Run a benchmark from the repository root as a module: ``python -m benchmarks.bench_daemon --quick``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: consumer settings of the passthrough (and of nothing else: the daemon has its own)
PASSTHROUGH_CONSUMER = {"enable_auto_commit": False, "auto_offset_reset": "earliest",
                        "max_partition_fetch_bytes": 4 * 1024 * 1024, "fetch_max_wait_ms": 100}
#: producer settings of the passthrough: idempotent, acks=all, linger 5 ms, 512 KiB batches
PASSTHROUGH_PRODUCER = {"acks": "all", "enable_idempotence": True, "linger_ms": 5, "max_batch_size": 512 * 1024}
#: producer settings used to write a benchmark's input
INPUT_PRODUCER = {"linger_ms": 20, "max_batch_size": 512 * 1024, "acks": "all"}

Row = tuple[str, int, bytes | None, bytes | None, int]
"""A record to produce: ``(topic, partition, key, value, timestamp_ms)``."""


@contextmanager
def broker(bootstrap: str | None, *, heap_opts: str | None = None, stop_grace: float | None = None) -> Iterator[str]:
    """``bootstrap`` when given (not empty); otherwise a local single broker for the block, stopped
    after it (``stop_grace``: seconds of clean shutdown, the handle's default when None).
    ``heap_opts``: a default ``KAFKA_HEAP_OPTS`` for that broker (an existing value wins)."""
    if bootstrap:
        yield bootstrap
        return
    from scripts.kafka import localkafka

    if heap_opts:
        os.environ.setdefault("KAFKA_HEAP_OPTS", heap_opts)
    handle = localkafka.start_single(timeout=180)
    try:
        yield handle.bootstrap
    finally:
        if stop_grace is None:
            handle.stop()
        else:
            handle.stop(grace=stop_grace)


def run_on_broker(main_async: Callable[..., Awaitable[int | None]], *args: Any) -> int:
    """``asyncio.run(main_async(bootstrap, *args))`` on ``$KAFKA_BOOTSTRAP_SERVERS`` or a local broker
    started for it (1 GiB heap) and stopped after; the exit status it returns (0 for None)."""
    with broker(os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip(), heap_opts="-Xmx1g -Xms512m",
                stop_grace=5.0) as bootstrap:
        return asyncio.run(main_async(bootstrap, *args)) or 0


async def create_topics(bootstrap: str, names: Sequence[str], partitions: int = 1,
                        configs: Mapping[str, str] | None = None, *, timeout: float = 10.0) -> None:
    """Create ``names`` (``partitions`` each, replication 1, ``configs``) and wait until every one is
    described with all its partitions led. Raises TimeoutError after ``timeout`` seconds."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1, topic_configs=dict(configs or {})) for n in names])
        deadline = time.monotonic() + timeout
        while True:
            described = await admin.describe_topics(list(names))
            if len(described) == len(names) and all(
                d["error_code"] == 0 and len(d["partitions"]) == partitions
                and all(p["leader"] >= 0 for p in d["partitions"]) for d in described
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {list(names)} not ready with {partitions} partitions after {timeout} s")
            await asyncio.sleep(0.05)
    finally:
        await admin.close()


class BatchSender:
    """Records sent in order as whole producer batches: one open batch per (topic, partition), sent
    when full; :meth:`flush` sends the rest and waits until every batch is acknowledged."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self.batches: dict[tuple[str, int], Any] = {}
        self.futures: list[Any] = []

    async def add(self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int) -> None:
        b = self.batches.get((topic, partition))
        if b is None:
            b = self.batches[(topic, partition)] = self.producer.create_batch()
        if b.append(key=key, value=value, timestamp=timestamp) is None:
            self.futures.append(await self.producer.send_batch(b, topic, partition=partition))
            b = self.batches[(topic, partition)] = self.producer.create_batch()
            b.append(key=key, value=value, timestamp=timestamp)

    async def flush(self) -> None:
        for (topic, partition), b in self.batches.items():
            self.futures.append(await self.producer.send_batch(b, topic, partition=partition))
        self.batches = {}
        await asyncio.gather(*self.futures)
        self.futures = []


async def produce_batched(bootstrap: str, rows: Iterable[Row], **producer_kwargs: Any) -> float:
    """Write ``rows`` with one producer (:data:`INPUT_PRODUCER` settings unless overridden) through a
    :class:`BatchSender`; return the seconds from the first record to the last acknowledgement."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **{**INPUT_PRODUCER, **producer_kwargs})
    await producer.start()
    started = time.perf_counter()
    try:
        sender = BatchSender(producer)
        for topic, partition, key, value, ts in rows:
            await sender.add(topic, partition, key, value, ts)
        await sender.flush()
    finally:
        await producer.stop()
    return time.perf_counter() - started


async def end_offsets(bootstrap: str, topics: Sequence[str], partitions: int) -> dict[Any, int]:
    """``{TopicPartition: end offset}`` of partitions ``0..partitions-1`` of each of ``topics``."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        return dict(await consumer.end_offsets([TopicPartition(t, p) for t in topics for p in range(partitions)]))
    finally:
        await consumer.stop()


# ---- the passthrough ----------------------------------------------------------------------------


async def passthrough_clients(bootstrap: str, topics: Sequence[str], group: str) -> tuple[Any, Any]:
    """A started consumer of ``topics`` in ``group`` and a started producer, with the passthrough's
    settings (:data:`PASSTHROUGH_CONSUMER`, :data:`PASSTHROUGH_PRODUCER`)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    consumer = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, **PASSTHROUGH_CONSUMER)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **PASSTHROUGH_PRODUCER)
    await producer.start()
    await consumer.start()
    return consumer, producer


async def passthrough_round(consumer: Any, producer: Any, sink: str) -> dict[Any, int]:
    """One ``getmany`` batch (up to 5000 records): every record re-sent unchanged (key, value,
    timestamp) to the same partition of ``sink`` as whole producer batches, then, once the sends are
    acknowledged, the offsets committed. Returns the committed ``{TopicPartition: offset}``."""
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
    return offsets


async def passthrough_until(bootstrap: str, topics: Sequence[str], ends: Mapping[Any, int], partitions: int,
                            name: str = "bench-pass") -> float:
    """The passthrough over ``topics`` into a new ``partitions``-partition topic until every
    ``{TopicPartition: end}`` of ``ends`` is committed; seconds from "the group has its partitions"
    to the last commit."""
    import uuid

    sink = f"{name}-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [sink], partitions)
    consumer, producer = await passthrough_clients(bootstrap, topics, f"{name}-{uuid.uuid4().hex[:8]}")
    want = {tp: e for tp, e in ends.items() if e}
    try:
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=100)
        started = time.perf_counter()
        done: dict[Any, int] = {}
        while any(done.get(tp, 0) < e for tp, e in want.items()):
            done.update(await passthrough_round(consumer, producer, sink))
        return time.perf_counter() - started
    finally:
        await consumer.stop()
        await producer.stop()


# ---- the daemon in this process -------------------------------------------------------------------

class RunningApp:
    """A ``StreamApp`` running as a task of this loop (see :func:`app_running`)."""

    def __init__(self, app: Any, runner: asyncio.Task[Any]) -> None:
        self.app = app
        self.runner = runner

    async def check(self) -> None:
        """Re-raise the app's failure if it has stopped."""
        if self.runner.done():
            await self.runner

    async def until(self, condition: Callable[[], bool], poll: float) -> None:
        """Wait until ``condition()``, checking it every ``poll`` seconds (and :meth:`check`)."""
        while not condition():
            await self.check()
            await asyncio.sleep(poll)


@asynccontextmanager
async def app_running(topology: Any, config: Any, tasks: int) -> AsyncIterator[RunningApp]:
    """``StreamApp(topology, config)`` running in this loop, entered once ``tasks`` of its tasks run;
    stopped (and its failure, if any, re-raised) on exit."""
    from streamproc.runtime.app import StreamApp

    app = StreamApp(topology, config)
    run = RunningApp(app, asyncio.create_task(app.run()))
    try:
        await run.until(lambda: len(app.tasks.running()) >= tasks, 0.005)
        yield run
    finally:
        await app.stop()
        await run.runner


# ---- a phase in its own process -----------------------------------------------------------------


def measured(phase: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``phase()``'s result plus ``cpu`` (the CPU seconds, user + system, it took) and ``rss_mb``
    (this process's peak RSS, MB)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = phase()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {**result, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "rss_mb": after.ru_maxrss / 1024}


def run_in_child(child: Callable[..., None], phase: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """Run ``child(phase, args, queue)`` in a spawned process (a module-level function, so the child
    can import it) and return the dict it puts on the queue."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(phase, args, q))
    p.start()
    result = q.get(timeout=3600)
    p.join()
    return dict(result)


# ---- an older version of a module ---------------------------------------------------------------


def source_at(commit: str, path: str) -> str:
    """The text of the repository file ``path`` at ``commit`` (``git show``)."""
    return subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{path}"],
                          capture_output=True, text=True, check=True).stdout


def module_from_source(source: str, name: str, package: str = "streamproc.processors",
                       filename: str | None = None) -> ModuleType:
    """A module ``<package>.<name>`` made from ``source`` (run from source, never compiled), registered
    in ``sys.modules`` so its relative imports and pickling work; ``filename`` shows in tracebacks."""
    spec = importlib.util.spec_from_loader(f"{package}.{name}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[spec.name] = module
    exec(compile(source, filename or f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own code, an older commit
    return module
