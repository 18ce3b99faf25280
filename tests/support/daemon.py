"""Helpers of the daemon integration tests (``test_daemon_*.py`` and others that run the daemon).

* :func:`running_app`: a :class:`StreamApp` running in the test's loop, stopped on exit (its
  fatal error, if any, re-raised).
* :func:`expected_by_partition`: what the daemon must output, computed with the
  TopologyTestDriver, one driver per input partition (the daemon's tasks are per partition: stream
  time, sessions and grace buffers are per partition, so the equivalence is per partition).
* :func:`committed_offsets`: a group's committed offsets.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from scripts.fault.harness import committed_offsets
from streamproc.config import Config
from streamproc.engine.partitioning import partition_for
from streamproc.runtime.app import StreamApp
from streamproc.testing import TopologyTestDriver

__all__ = ["beginning_offsets", "committed_offsets", "decode", "exit_code", "expected_by_partition", "read_to_end", "read_topic",
           "recent_base_ts", "running_app", "streamproc_command", "unreflected", "wait_until"]


def recent_base_ts(span_ms: int, margin_ms: int = 3_600_000) -> int:
    """A first event time such that ``[base, base + span_ms]`` ends ``margin_ms`` before now.

    Test data must carry recent timestamps: the broker deletes records by *their* timestamps
    (``retention.ms``, checked every minute by the test broker; 24 h + store retention on session
    changelogs), and Kafka 4 rejects timestamps more than an hour in the future. Whole seconds, so
    runs differ only in the offset of the whole data set."""
    now = int(time.time()) * 1000
    return now - margin_ms - span_ms


async def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running_app(topology: Any, bootstrap: str, application_id: str, *, wait_tasks: int | None = None,
                      **settings: Any) -> AsyncIterator[StreamApp]:
    """Run a StreamApp in the background; with ``wait_tasks`` wait until that many tasks run."""
    settings.setdefault("commit_interval_ms", 200)
    settings.setdefault("loop", "asyncio")
    app = StreamApp(topology, Config(application_id=application_id, bootstrap_servers=bootstrap, **settings))
    runner = asyncio.create_task(app.run())
    try:
        if wait_tasks is not None:
            await wait_until(lambda: runner.done() or len(app.tasks.running()) >= wait_tasks, 60,
                             f"{wait_tasks} running tasks")
            if runner.done():
                await runner
        yield app
    finally:
        if not runner.done():
            await app.stop()
        await runner


def decode(record: Any) -> tuple[Any, Any, int]:
    """A daemon output record (string key, JSON value) as ``(key, value, timestamp)``."""
    key = record.key.decode() if record.key is not None else None
    value = json.loads(record.value) if record.value is not None else None
    return key, value, record.timestamp


def expected_by_partition(build: Callable[[], Any], inputs: Iterable[tuple[str, str, Any, int]],
                          output: str, partitions: int,
                          task_key: Callable[[str, str, Any], str] | None = None) -> dict[int, list[tuple[Any, Any, int]]]:
    """Run ``inputs`` ``(topic, key, value, timestamp)`` (in production order) through one
    TopologyTestDriver per task partition and return each driver's output ``(key, value, timestamp)``
    in order. The task partition is Kafka's murmur2 partition of ``task_key(topic, key, value)``
    (default: the record key), UTF-8 encoded: the key the stateful task is partitioned by."""
    drivers = {p: TopologyTestDriver(build(), application_id="expected") for p in range(partitions)}
    try:
        for topic, key, value, ts in inputs:
            routing = key if task_key is None else task_key(topic, key, value)
            p = partition_for(routing.encode(), partitions)
            drivers[p].input_topic(topic).pipe(key, value, ts)
        return {p: [(r.key, r.value, r.timestamp) for r in d.output_topic(output).read_records()]
                for p, d in drivers.items()}
    finally:
        for d in drivers.values():
            d.close()


async def beginning_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The log start offset of every partition of ``topic`` (moved by retention or DeleteRecords)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from tests.support.kafka import topic_partitions

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(bootstrap, topic))]
        return {tp.partition: off for tp, off in (await consumer.beginning_offsets(tps)).items()}
    finally:
        await consumer.stop()


def streamproc_command() -> list[str]:
    """The ``streamproc`` command of this interpreter (its console script, else ``python -m``)."""
    script = Path(sys.executable).parent / "streamproc"
    return [str(script)] if script.exists() else [sys.executable, "-m", "streamproc.cli"]


async def exit_code(proc: subprocess.Popen[bytes], log: Path | None = None, timeout: float = 60.0) -> int:
    """The exit status of the daemon process ``proc`` once it exits; killed and an AssertionError
    (with the end of its ``log``) when it has not exited within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            tail = log.read_text()[-3000:] if log is not None else ""
            raise AssertionError(f"the daemon did not exit within {timeout} s\n{tail}")
        await asyncio.sleep(0.1)
    return proc.returncode


async def read_topic(bootstrap: str, topic: str, expected: int, timeout: float, idle: float = 0.0) -> list[Any]:
    """Read ``topic`` from the beginning (all partitions) until ``expected`` records arrived or
    ``timeout`` passed; then keep reading for ``idle`` more seconds (to catch extra records).
    Returns what was read (the caller compares, so a shortfall shows as a diff, not a timeout)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        parts = None
        deadline = time.monotonic() + 30
        while not parts:
            await consumer._client.force_metadata_update()
            parts = consumer.partitions_for_topic(topic)
            if not parts and time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} has no metadata after 30 s")
        consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=200, max_records=10_000)).values():
                out.extend(msgs)
        idle_end = time.monotonic() + idle
        while time.monotonic() < idle_end:
            for msgs in (await consumer.getmany(timeout_ms=200, max_records=10_000)).values():
                out.extend(msgs)
        return out
    finally:
        await consumer.stop()


async def read_to_end(bootstrap: str, topic: str, timeout: float = 60.0) -> list[Any]:
    """Every record of ``topic`` up to its end offsets as of the call."""
    from tests.support.kafka import end_offsets

    ends = await end_offsets(bootstrap, topic)
    return await read_topic(bootstrap, topic, sum(ends.values()), timeout)


def unreflected(inputs: Iterable[tuple[str, int]], outputs: Iterable[Any]) -> list[tuple[str, int]]:
    """Session inputs ``(user, ts)`` no sessions output record ``{"user","start","end"}`` covers."""
    windows: dict[str, list[tuple[int, int]]] = {}
    for r in outputs:
        v = json.loads(r.value)
        windows.setdefault(v["user"], []).append((v["start"], v["end"]))
    return [(u, ts) for u, ts in inputs if not any(s <= ts <= e for s, e in windows.get(u, ()))]


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now (for a daemon's metrics or query endpoint)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def throttle_restore(monkeypatch: Any, seconds_per_record: Callable[[], float]) -> None:
    """Slow down every Restorer started from now on (this test only): after each fetch of its
    consumer, an asyncio sleep of ``seconds_per_record()`` per fetched record, so that a restore
    surely takes long enough to be observed however fast or loaded the machine is."""
    from streamproc.runtime.restore import Restorer

    original_start = Restorer.on_start

    async def throttled_start(self: Restorer) -> None:
        await original_start(self)
        consumer = self._consumer
        assert consumer is not None
        fetch = consumer.getmany

        async def slow_getmany(*args: Any, **kwargs: Any) -> Any:
            batch = await fetch(*args, **kwargs)
            await asyncio.sleep(sum(map(len, batch.values())) * seconds_per_record())
            return batch

        consumer.getmany = slow_getmany

    monkeypatch.setattr(Restorer, "on_start", throttled_start)
