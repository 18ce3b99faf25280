"""Small record types of the task layer: :class:`TaskId` and :class:`OutputRecord`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["NO_HEADERS", "OutputRecord", "TaskId"]

NO_HEADERS: Sequence[tuple[str, bytes]] = ()


class TaskId(NamedTuple):
    """One partition of one sub-topology; ``str(TaskId(0, 3)) == "0_3"``."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"


class OutputRecord(NamedTuple):
    """A record a task's sink produced.

    ``key``/``value`` are bytes when the sink has a serde, else the Python objects the topology made.
    """

    topic: str
    key: Any
    value: Any
    timestamp: int
    headers: Sequence[tuple[str, bytes]] = NO_HEADERS
