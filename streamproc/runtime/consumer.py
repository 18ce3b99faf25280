"""The input consumer (group member) and the delayed-ack service.

:class:`InputConsumer` is an aiokafka consumer in group ``application_id`` with auto-commit off
and our own assignor (``assignor.py``): it assigns whole tasks, partition ``p`` of every
co-partitioned topic to the same member, so one task sees all of its inputs; it is sticky and
places standby tasks. Offsets are committed only by the
:class:`~streamproc.runtime.commit.CommitSequence`.

:class:`AckService` owns the :class:`~streamproc.purgatory.AckTracker` (one per app, keyed by
input ``TopicPartition``) and drives its timing wheel from the running loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

from ..purgatory import AckTracker, DelayedOperationPurgatory, Timer
from .assignor import TaskAssignor
from .service import Service

__all__ = ["CONSUMER_DEFAULTS", "AckService", "InputConsumer", "stop_consumer"]

log = logging.getLogger(__name__)

#: Consumer defaults (overridable with ``--consumer-config``).
CONSUMER_DEFAULTS: dict[str, Any] = {
    "max_partition_fetch_bytes": 4 * 1024 * 1024,
    "fetch_max_wait_ms": 100,
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 3_000,
}


class InputConsumer(Service):
    """The group consumer; ``listener`` gets the rebalance callbacks, ``assignor`` assigns."""

    label = "consumer"

    def __init__(self, bootstrap_servers: str, group_id: str, client_id: str, topics: list[str],
                 listener: ConsumerRebalanceListener, auto_offset_reset: str, max_poll_records: int,
                 overrides: Mapping[str, Any], assignor: TaskAssignor) -> None:
        super().__init__()
        self._kwargs = {**CONSUMER_DEFAULTS, "max_poll_records": max_poll_records, **overrides,
                        "partition_assignment_strategy": (assignor,)}
        self._bootstrap = bootstrap_servers
        self._group = group_id
        self._client_id = client_id
        self._topics = topics
        self._listener = listener
        self._reset = auto_offset_reset
        self.consumer: AIOKafkaConsumer | None = None

    async def on_start(self) -> None:
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, group_id=self._group,
                                         client_id=self._client_id, enable_auto_commit=False,
                                         auto_offset_reset=self._reset, **self._kwargs)
        await self.consumer.start()
        self.consumer.subscribe(self._topics, listener=self._listener)
        log.info("consumer joined group %s, subscribed to %s", self._group, ", ".join(self._topics))

    async def on_stop(self) -> None:
        if self.consumer is not None:
            await stop_consumer(self.consumer)


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    """``consumer.stop()``, also while the brokers are away: aiokafka's fetcher then re-raises the
    cancellation of its own in-flight fetch out of ``stop()`` (before the client's connections are
    closed); that is not a cancellation of ours, so the connections are closed here and the stop
    goes on. A cancellation of the caller still propagates."""
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("consumer stopped with a fetch in flight (brokers away); closing its connections")
        await consumer._client.close()  # noqa: SLF001 - aiokafka offers no public way after a failed stop


class AckService(Service):
    """The delayed-ack tracker and the timing wheel that expires its delivery timeouts."""

    label = "acks"

    def __init__(self, delivery_timeout_ms: int, on_failure: Callable[[Hashable, BaseException], None]) -> None:
        super().__init__()
        self.timer = Timer(tick_ms=10)
        self.purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory("delayed-acks", self.timer)
        self.tracker = AckTracker(self.purgatory, delivery_timeout_ms, on_failure)

    async def on_start(self) -> None:
        self.timer.start()

    async def on_stop(self) -> None:
        self.tracker.close()
        self.purgatory.shutdown()
