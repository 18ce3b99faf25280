"""The daemon's view of its tasks: which input partitions and changelog partitions each one owns.

A :class:`ManagedTask` wraps a :class:`~streamproc.engine.task.Task` with its run state:
``RESTORING`` (input paused, stores being rebuilt), ``RUNNING``, ``SUSPENDED`` (moved away by a
rebalance, state kept), ``STANDBY`` (state follows the changelogs) or ``CLOSED``. The
:class:`TaskRegistry` maps input partitions to tasks (a task of a sub-topology with several
co-partitioned sources owns one partition of each).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from aiokafka import TopicPartition

from ..engine.task import Task, TaskId
from .partition_group import PartitionGroup

__all__ = ["ManagedTask", "TaskRegistry", "TaskState"]

log = logging.getLogger(__name__)


class TaskState(str, Enum):
    RESTORING = "restoring"
    RUNNING = "running"
    #: moved away by a rebalance, its stores kept in memory (``suspended_task_retention_ms``)
    SUSPENDED = "suspended"
    #: a standby: its stores follow the changelogs, it processes no input
    STANDBY = "standby"
    CLOSED = "closed"


@dataclass(eq=False)
class ManagedTask:
    task: Task
    inputs: frozenset[TopicPartition]
    #: fetched, not yet processed input records, released in timestamp order
    buffer: PartitionGroup
    state: TaskState = TaskState.RESTORING
    #: input partitions paused because their buffer is full
    paused: set[TopicPartition] = field(default_factory=set)
    #: when the last "waited max_task_idle_ms" warning was logged (monotonic s)
    enforced_logged_at: float = float("-inf")
    #: last value of each ``dropped_records_<reason>`` counter exported to Prometheus, by operator
    exported: dict[tuple[str, str], int] = field(default_factory=dict)
    #: suspended: the next offset of each changelog partition (the stores hold everything below)
    positions: dict[TopicPartition, int] | None = None
    #: when it was suspended (monotonic s)
    suspended_at: float = 0.0

    @property
    def id(self) -> TaskId:
        return self.task.id

    def changelog_partitions(self) -> dict[TopicPartition, Any]:
        """Changelog partition -> change-logging store."""
        t = self.task
        return {TopicPartition(topic, t.partition): t.stores[name] for name, topic in t.changelog_topics.items()}


class TaskRegistry:
    """Tasks by id and by input partition."""

    def __init__(self) -> None:
        self._by_id: dict[TaskId, ManagedTask] = {}
        self._by_tp: dict[TopicPartition, ManagedTask] = {}

    def add(self, mt: ManagedTask) -> None:
        if mt.id in self._by_id:
            raise ValueError(f"task {mt.id} already exists")
        self._by_id[mt.id] = mt
        for tp in mt.inputs:
            self._by_tp[tp] = mt

    def remove(self, task_id: TaskId) -> ManagedTask | None:
        mt = self._by_id.pop(task_id, None)
        if mt is not None:
            for tp in mt.inputs:
                if self._by_tp.get(tp) is mt:
                    del self._by_tp[tp]
        return mt

    def get(self, task_id: TaskId) -> ManagedTask | None:
        return self._by_id.get(task_id)

    def for_partition(self, tp: TopicPartition) -> ManagedTask | None:
        return self._by_tp.get(tp)

    def __iter__(self) -> Iterator[ManagedTask]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def running(self) -> list[ManagedTask]:
        return [mt for mt in self._by_id.values() if mt.state is TaskState.RUNNING]

    def ids(self) -> list[TaskId]:
        return sorted(self._by_id)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in TaskState if s is not TaskState.CLOSED}
        for mt in self._by_id.values():
            if mt.state is not TaskState.CLOSED:
                out[mt.state.value] += 1
        return out


def group_by_task(tps: Iterable[TopicPartition], source_subtopology: dict[str, int]) -> dict[TaskId, set[TopicPartition]]:
    """Assigned input partitions grouped by the task that reads them."""
    out: dict[TaskId, set[TopicPartition]] = {}
    for tp in tps:
        sid = source_subtopology.get(tp.topic)
        if sid is None:
            log.warning("assigned partition %s[%d] is not a source of the topology; ignored", tp.topic, tp.partition)
            continue
        out.setdefault(TaskId(sid, tp.partition), set()).add(tp)
    return out
