"""Timing-wheel timer and delayed-operation purgatory (the seed's "Purgatory Redesign Proposal").

- :class:`Timer`: hierarchical timing wheel, O(1) cancel, bucket-driven clock; ``advance_clock`` for
  deterministic use, ``start()``/``stop()`` to let an asyncio/uvloop loop drive it with one handle.
- :class:`TimerTask`: a one-shot task; :class:`DelayedOperation`: completes once, by condition or expiry.
- :class:`DelayedOperationPurgatory`: watcher lists per key + timeouts + estimated-count purge.
- :class:`AckTracker` / :class:`DelayedAck`: delayed acknowledgement of input offsets for the runtime.
"""

from .delayed_ack import AckTracker, DelayedAck, PartitionAcks
from .operation import DelayedOperation
from .purgatory import DelayedOperationPurgatory
from .task import TimerTask, TimerTaskList
from .timer import DEFAULT_WHEEL_SIZE, Timer

__all__ = [
    "DEFAULT_WHEEL_SIZE",
    "AckTracker",
    "DelayedAck",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "PartitionAcks",
    "Timer",
    "TimerTask",
    "TimerTaskList",
]
