"""Batched sends through one aiokafka producer.

A :class:`SendBuffer` collects records per topic-partition (partitioned here with Kafka's
murmur2 partitioner, so keys land where Java clients and our co-partitioned inputs expect them)
and :meth:`SendBuffer.flush` hands them to the producer as whole ``BatchBuilder`` batches: one
``await`` per producer batch, never one per record. Each batch yields one future that resolves
when the brokers acknowledged it; the futures feed the delayed-ack tracker.

Keys and values must be ``bytes`` or ``None`` here; :func:`~streamproc.engine.partitioning.to_bytes` turns the Python objects a
sink without a serde emits into bytes (bytes pass through, everything else is JSON).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import IllegalOperation, KafkaError

from ..engine.partitioning import HASH_CACHE, HASH_CACHE_MAX, ROUND_ROBIN, murmur2, partition_for, to_bytes
from .service import Service
from .transactions import Transactions

__all__ = ["OutputProducer", "SendBuffer"]

log = logging.getLogger(__name__)

#: Producer defaults (overridable with ``--producer-config``): durable acks, idempotent retries,
#: large batches so a getmany batch leaves in a few produce requests.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "linger_ms": 5,
    "max_batch_size": 512 * 1024,
    "max_request_size": 1024 * 1024,
}

#: How long a producer being replaced gets to stop before its stop goes on in the background (s).
RETIRE_WAIT_S = 2.0


class OutputProducer(Service):
    """Owns the aiokafka producer; knows the partition count of every topic it writes to.

    With a ``transactional_id`` among the overrides it is transactional (exactly-once) and owns the
    :class:`~streamproc.runtime.transactions.Transactions` every flush goes through."""

    label = "producer"

    def __init__(self, bootstrap_servers: str, overrides: Mapping[str, Any], client_id: str) -> None:
        super().__init__()
        self._kwargs = {**PRODUCER_DEFAULTS, **overrides}
        if self._kwargs.get("enable_idempotence") and self._kwargs.get("acks") not in ("all", -1):
            # aiokafka rejects idempotence with acks != all; the user's acks wins.
            self._kwargs["enable_idempotence"] = False
        self._bootstrap = bootstrap_servers
        self._client_id = client_id
        self.producer: AIOKafkaProducer | None = None
        self.partition_counts: dict[str, int] = {}
        self._retiring: set[asyncio.Task[Any]] = set()
        transactional_id = self._kwargs.get("transactional_id")
        #: exactly-once: the transaction state every flush goes through (None: at-least-once)
        self.transactions: Transactions | None = None
        if transactional_id:
            self.transactions = Transactions(str(transactional_id),
                                             int(self._kwargs.get("transaction_timeout_ms", 10_000)),
                                             lambda: self.producer, self.restart)

    async def on_start(self) -> None:
        self.producer = AIOKafkaProducer(bootstrap_servers=self._bootstrap, client_id=self._client_id,
                                         **self._kwargs)
        await self.producer.start()

    async def on_stop(self) -> None:
        for task in list(self._retiring):
            task.cancel()
        if self.producer is not None:
            await self.producer.stop()

    def abort(self) -> None:
        producer = self.producer
        if producer is not None:
            log.warning("producer closed with sends not acknowledged (their input offsets are not committed: "
                        "those records are processed again at the next start)")
            closing = asyncio.ensure_future(producer.client.close())
            closing.add_done_callback(_closed)  # its failure (brokers away) is expected: not a traceback

    async def restart(self) -> None:
        """Replace the aiokafka producer by a new one with the same settings (exactly-once recovery:
        a new transactional producer aborts the old one's transaction). Raises when the brokers
        cannot be reached (the caller tries again later)."""
        old = self.producer
        if old is not None:
            # its transaction is being aborted: nothing of it needs to be delivered. Its stop waits
            # for its pending batches (until the brokers answer or the batches expire), so it goes on
            # in the background, kept here until done (cancelled at shutdown).
            stopping = asyncio.ensure_future(old.stop())
            self._retiring.add(stopping)
            stopping.add_done_callback(self._retired)
            await asyncio.wait({stopping}, timeout=RETIRE_WAIT_S)
        self.producer = None
        await self.on_start()

    def _retired(self, task: asyncio.Task[Any]) -> None:
        self._retiring.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("stopping a replaced producer: %r", task.exception())

    def buffer(self) -> SendBuffer:
        return SendBuffer(self)

    async def flush(self) -> None:
        assert self.producer is not None
        await self.producer.flush()


def _closed(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of an aborted producer's close, logged at DEBUG only."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("closing an aborted producer: %r", task.exception())


#: The headers of a record without any (shared: aiokafka's batch builder only reads them).
_NO_HEADERS: list[tuple[str, bytes]] = []
class SendBuffer:
    """Records waiting to be sent, per topic-partition in arrival order, already encoded into
    aiokafka producer batches (``BatchBuilder``): a record is appended to its partition's open
    batch when it is added (no intermediate tuple, nothing kept of it but its bytes in the batch);
    a batch that fills up waits, in order, for :meth:`flush`, which hands every batch to the
    producer."""

    __slots__ = ("_open", "_out", "count")

    def __init__(self, out: OutputProducer) -> None:
        self._out = out
        #: topic -> partition -> ``[open batch, sources, full batches (or None)]``
        self._open: dict[str, dict[int, list[Any]]] = {}
        self.count = 0

    def _new_batch(self, entry: list[Any]) -> Any:
        producer = self._out.producer
        assert producer is not None, "producer not started"
        batch = entry[0] = producer.create_batch()
        return batch

    def _entry(self, topic: str, partition: int) -> list[Any]:
        """The pending batches of ``topic``/``partition`` (created empty)."""
        parts = self._open.get(topic)
        if parts is None:
            parts = self._open[topic] = {}
        entry = parts.get(partition)
        if entry is None:
            entry = parts[partition] = [None, set(), None]
            self._new_batch(entry)
        return entry

    def _append(self, entry: list[Any], topic: str, partition: int, key: bytes | None, value: bytes | None,
                timestamp: int | None, headers: list[Any]) -> None:
        """Append one record to ``entry``'s open batch (a new one when it is full)."""
        if entry[0].append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            self._overflow(entry, topic, partition, key, value, timestamp, headers)

    def _overflow(self, entry: list[Any], topic: str, partition: int, key: bytes | None, value: bytes | None,
                  timestamp: int | None, headers: list[Any]) -> None:
        """``entry``'s open batch is full: queue it and append the record to a new one."""
        batch = entry[0]
        if batch.record_count() == 0:
            raise ValueError(f"a record for {topic}[{partition}] is larger than the producer batch size; raise "
                             f"max_batch_size with --producer-config")
        if entry[2] is None:
            entry[2] = [batch]
        else:
            entry[2].append(batch)
        batch = self._new_batch(entry)
        if batch.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            raise ValueError(f"a record for {topic}[{partition}] is larger than the producer batch size; "
                             f"raise max_batch_size with --producer-config")

    def add(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int | None,
            headers: Sequence[tuple[str, bytes]] | None = None, partition: int | None = None,
            source: Any = None) -> None:
        """Buffer one record; ``source`` (the input partition that caused it) is reported back
        with the future of the producer batch that carries it."""
        if partition is None:
            n = self._out.partition_counts.get(topic)
            if n is None:
                raise KeyError(f"topic {topic!r} is not known to the producer (not in the topic plan)")
            partition = partition_for(key, n)
        entry = self._entry(topic, partition)
        self._append(entry, topic, partition, key, value, timestamp, list(headers) if headers else _NO_HEADERS)
        if source is not None:
            entry[1].add(source)
        self.count += 1

    def add_to_partition(self, topic: str, partition: int, records: Sequence[Any]) -> None:
        """Buffer ``records`` (objects with ``key``, ``value`` bytes and ``timestamp``, e.g.
        ``ChangelogRecord``) for one partition, without headers: the changelog fast path."""
        if not records:
            return
        entry = self._entry(topic, partition)
        overflow = self._overflow
        no_headers = _NO_HEADERS
        for key, value, ts in records:
            if entry[0].append(timestamp=ts, key=key, value=value, headers=no_headers) is None:
                overflow(entry, topic, partition, key, value, ts, no_headers)
        self.count += len(records)

    def add_outputs(self, outputs: Sequence[Any], source: Any) -> dict[str, int]:
        """Buffer a task's :class:`OutputRecord` s (key/value bytes, or objects turned into bytes by
        :func:`to_bytes`), all caused by input partition ``source``; returns records per topic.
        The hot path: one tight loop, the partitioner's hash memoised per key, each record
        appended to its partition's open producer batch at once."""
        counts: dict[str, int] = {}
        open_batches = self._open
        partition_counts = self._out.partition_counts
        cache = HASH_CACHE
        no_headers = _NO_HEADERS
        last_topic: Any = None
        parts: Any = None
        n: Any = 0
        run = 0
        for out in outputs:
            topic, key, value, ts, headers = out
            if key is not None and type(key) is not bytes:
                key = to_bytes(key, f"key for topic {topic!r}")
            if value is not None and type(value) is not bytes:
                value = to_bytes(value, f"value for topic {topic!r}")
            if topic is not last_topic:  # outputs of one sink share their topic object
                if run:
                    counts[last_topic] = counts.get(last_topic, 0) + run
                    run = 0
                n = partition_counts.get(topic)
                if n is None:
                    raise KeyError(f"topic {topic!r} is not known to the producer (not in the topic plan)")
                parts = open_batches.get(topic)
                if parts is None:
                    parts = open_batches[topic] = {}
                last_topic = topic
            if key is None:
                partition = next(ROUND_ROBIN) % n
            else:
                h = cache.get(key)
                if h is None:
                    if len(cache) >= HASH_CACHE_MAX:
                        cache.clear()
                    h = cache[key] = murmur2(key) & 0x7FFFFFFF
                partition = h % n
            entry = parts.get(partition)
            if entry is None:
                entry = self._entry(topic, partition)
            entry[1].add(source)
            if not headers:
                headers = no_headers
            elif type(headers) is not list:
                headers = list(headers)
            if entry[0].append(timestamp=ts, key=key, value=value, headers=headers) is None:
                self._overflow(entry, topic, partition, key, value, ts, headers)
            run += 1
        if run:
            counts[last_topic] = counts.get(last_topic, 0) + run
        self.count += len(outputs)
        return counts

    def __len__(self) -> int:
        return self.count

    async def flush(self) -> list[tuple[asyncio.Future[Any], frozenset[Any]]]:
        """Send everything buffered; return ``(future, sources)`` per producer batch, where
        ``sources`` are the ``source`` values of the records sent to that batch's topic-partition.

        Exactly-once: the sends join the open transaction (begun here if needed). When the
        transaction already failed or a send raises (e.g. the producer was fenced), the records are
        dropped and nothing is returned: the transaction is aborted and their tasks rewound."""
        txn = self._out.transactions
        if txn is None:
            return await self._send_all()
        if not await txn.before_send():
            self._open, self.count = {}, 0
            return []
        try:
            sent = await self._send_all()
        except (KafkaError, IllegalOperation) as exc:
            txn.fail(exc)
            return []
        txn.track(fut for fut, _ in sent)
        return sent

    async def _send_all(self) -> list[tuple[asyncio.Future[Any], frozenset[Any]]]:
        producer = self._out.producer
        assert producer is not None, "producer not started"
        sent: list[tuple[asyncio.Future[Any], frozenset[Any]]] = []
        open_batches, self._open, self.count = self._open, {}, 0
        for topic, parts in open_batches.items():
            for partition, (batch, sources, full) in parts.items():
                srcs = frozenset(sources)
                if full is not None:
                    for done in full:
                        sent.append((await producer.send_batch(done, topic, partition=partition), srcs))
                if batch.record_count():
                    sent.append((await producer.send_batch(batch, topic, partition=partition), srcs))
        return sent
