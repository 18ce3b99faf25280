"""Small record types of the task layer: :class:`TaskId`, and :class:`OutputRecord` (defined with the
processors, which produce it)."""

from __future__ import annotations

from typing import NamedTuple

from ..processors.context import NO_HEADERS, OutputRecord

__all__ = ["NO_HEADERS", "OutputRecord", "TaskId"]


class TaskId(NamedTuple):
    """One partition of one sub-topology; ``str(TaskId(0, 3)) == "0_3"``."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"
