"""Kafka helpers for tests: admin, topics, produce/consume, starting a local broker in pytest.

Plain (async) functions over a bootstrap string, importable by any test module or fixture
(``from tests.support.kafka import produce, consume_all, ...``). The pytest fixtures built on them
(``kafka_bootstrap``, ``topic_factory``, ``kafka_cluster``, ``cluster_topic_factory``) live in the
plugin :mod:`tests.support.kafka_fixtures`.

* :data:`localkafka`: the shared local-Kafka implementation, ``scripts/kafka/localkafka.py``
  (:class:`KafkaHandle` its handle type).
* :func:`unique_name`, :func:`kafka_admin`, :func:`topic_partitions`, :func:`wait_for_topic`,
  :func:`create_topic`, :func:`delete_topics`: names and topics.
* :class:`Out`, :func:`produce`, :func:`end_offsets`, :func:`consume_all`: records in and out.
* :func:`in_ci`, :func:`start_or_fail`: start a broker inside pytest; failure to start fails the
  test, except outside CI (``CI`` is not ``true``) with ``java`` or ``mvn`` missing from PATH,
  where the test is skipped with a message saying so. With ``CI=true`` nothing is ever skipped.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import pytest

from scripts.kafka import localkafka

KafkaHandle = localkafka.KafkaHandle


def in_ci() -> bool:
    """True under CI (``CI=true``), where a broker that fails to start never skips a test."""
    return os.environ.get("CI", "").lower() == "true"


def unique_name(prefix: str = "t") -> str:
    """A topic / group name no other test uses: ``<prefix>-<12 hex chars>``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------------------------
# Admin helpers
# --------------------------------------------------------------------------------------------


@asynccontextmanager
async def kafka_admin(bootstrap: str, **kwargs: Any) -> AsyncIterator[Any]:
    """An started ``AIOKafkaAdminClient`` on ``bootstrap``, closed on exit."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000, **kwargs)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def topic_partitions(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    """``{partition: {"leader": id, "replicas": [...], "isr": [...]}}`` from the broker's metadata."""
    async with kafka_admin(bootstrap) as admin:
        described = await admin.describe_topics([topic])
    out: dict[int, dict[str, Any]] = {}
    for t in described:
        if t["topic"] != topic or t["error_code"] != 0:
            continue
        for p in t["partitions"]:
            out[p["partition"]] = {"leader": p["leader"], "replicas": list(p["replicas"]), "isr": list(p["isr"])}
    return out


async def wait_for_topic(
    bootstrap: str, topic: str, partitions: int, *, min_isr_size: int = 1, timeout: float = 60.0
) -> dict[int, dict[str, Any]]:
    """Wait until metadata shows ``partitions`` partitions of ``topic``, each with a leader and an
    ISR of at least ``min_isr_size``; return that metadata. Raises TimeoutError with the last view."""
    deadline = time.monotonic() + timeout
    seen: dict[int, dict[str, Any]] = {}
    while True:
        try:
            seen = await topic_partitions(bootstrap, topic)
        except Exception as e:  # noqa: BLE001 - a broker restarting: keep polling until the deadline
            seen = {"error": repr(e)}  # type: ignore[dict-item]
        if len(seen) == partitions and all(
            isinstance(p, int) and m["leader"] >= 0 and len(m["isr"]) >= min_isr_size for p, m in seen.items()
        ):
            return seen
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic!r} not ready with {partitions} partitions after {timeout} s: {seen}")
        await asyncio.sleep(0.2)


async def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: Mapping[str, str | int] | None = None,
    *,
    timeout: float = 60.0,
) -> str:
    """Create ``name`` and wait until its metadata is complete. Raises on any broker error."""
    from aiokafka.admin import NewTopic

    topic = NewTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        topic_configs={k: str(v) for k, v in (configs or {}).items()},
    )
    async with kafka_admin(bootstrap) as admin:
        response = await admin.create_topics([topic], timeout_ms=int(timeout * 1000))
    for entry in response.topic_errors:
        topic_name, code = entry[0], entry[1]
        if code != 0:
            message = entry[2] if len(entry) > 2 else ""
            raise RuntimeError(f"creating topic {topic_name!r} failed with error code {code}: {message}")
    await wait_for_topic(bootstrap, name, partitions, timeout=timeout)
    return name


async def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Delete ``names`` (errors for topics already gone are ignored)."""
    if not names:
        return
    async with kafka_admin(bootstrap) as admin:
        await admin.delete_topics(list(names), timeout_ms=30_000)


# --------------------------------------------------------------------------------------------
# Produce / consume helpers
# --------------------------------------------------------------------------------------------


class Out(NamedTuple):
    """A record to produce: key/value bytes (or None), optional timestamp, headers, partition."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    headers: Sequence[tuple[str, bytes]] = ()
    partition: int | None = None


async def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Out | tuple[bytes | None, bytes | None]],
    **producer_kwargs: Any,
) -> list[Any]:
    """Send ``records`` to ``topic`` in order with one producer; return each record's
    ``RecordMetadata`` (partition, offset, timestamp) in input order. Raises on any failed send."""
    from aiokafka import AIOKafkaProducer

    producer_kwargs.setdefault("acks", "all")
    producer_kwargs.setdefault("linger_ms", 5)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **producer_kwargs)
    await producer.start()
    try:
        futures = []
        for r in records:
            rec = r if isinstance(r, Out) else Out(*r)
            futures.append(
                await producer.send(
                    topic, value=rec.value, key=rec.key, partition=rec.partition,
                    timestamp_ms=rec.timestamp_ms, headers=list(rec.headers) or None,
                )  # fmt: skip
            )
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The high watermark of every partition of ``topic`` right now."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = sorted(await topic_partitions(bootstrap, topic))
        if not parts:
            raise ValueError(f"topic {topic!r} does not exist on {bootstrap}")
        tps = [TopicPartition(topic, p) for p in parts]
        offsets = await consumer.end_offsets(tps)
        return {tp.partition: off for tp, off in offsets.items()}
    finally:
        await consumer.stop()


async def consume_all(
    bootstrap: str,
    topic: str,
    *,
    group_id: str | None = None,
    expected: int | None = None,
    timeout: float = 60.0,
    **consumer_kwargs: Any,
) -> list[Any]:
    """Read ``topic`` from the beginning up to its end offsets as of the call (or, with
    ``expected``, until that many records arrived) and return the ``ConsumerRecord`` s in the
    order received. With ``group_id`` the consumer subscribes in that group and commits;
    otherwise it assigns every partition. Raises TimeoutError saying how far it got."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    targets = await end_offsets(bootstrap, topic) if expected is None else {}
    consumer_kwargs.setdefault("auto_offset_reset", "earliest")
    consumer_kwargs.setdefault("enable_auto_commit", group_id is not None)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, **consumer_kwargs)
    await consumer.start()
    received: list[Any] = []
    positions: dict[int, int] = {}
    try:
        if group_id is None:
            parts = sorted(targets or await topic_partitions(bootstrap, topic))
            consumer.assign([TopicPartition(topic, p) for p in parts])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + timeout

        def done() -> bool:
            if expected is not None:
                return len(received) >= expected
            return all(positions.get(p, 0) >= end for p, end in targets.items())

        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"consume_all({topic!r}) got {len(received)} records in {timeout} s; "
                    f"positions {positions}, wanted {expected if expected is not None else targets}"
                )
            batch = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for tp, msgs in batch.items():
                received.extend(msgs)
                if msgs:
                    positions[tp.partition] = msgs[-1].offset + 1
        if group_id is not None:
            await consumer.commit()
        return received
    finally:
        await consumer.stop()


# --------------------------------------------------------------------------------------------
# Starting Kafka inside pytest
# --------------------------------------------------------------------------------------------


def start_or_fail(what: str, start: Callable[[], Any]) -> Any:
    """``start()``, its handle stopped at exit; a failure fails the test (skipped outside CI without java/mvn)."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing and not in_ci():
        pytest.skip(f"{what} needs {' and '.join(missing)} on PATH (not CI, so skipped)")
    try:
        handle = start()
    except Exception as e:  # noqa: BLE001 - reported as a test failure with the broker log
        pytest.fail(f"could not start {what}: {type(e).__name__}: {e}", pytrace=False)
    atexit.register(handle.stop)
    return handle
