"""How a task builds a window store (KIP-428) for a time-window aggregation or a stream-stream join.

A :class:`WindowStoreSpec` is a :class:`~streamproc.dsl.graph.StoreSpec` of kind ``"window"`` that
also carries the window size, the store's grace and whether it retains duplicates; the runtime
(tasks, the daemon's topic creation, restoration) handles it like any other store spec: it creates
the store, wraps it for change-logging (``<application_id>-<name>-changelog``, record key = key
bytes + 8-byte start [+ 4-byte sequence number with duplicates]) and restores it from that topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .graph import DAY_MS, StoreSpec

__all__ = ["WindowStoreSpec"]


@dataclass(frozen=True)
class WindowStoreSpec(StoreSpec):
    """A window store: ``retention_ms``, ``window_size_ms``, ``grace_ms`` (None: the retention, so the
    store itself only rejects expired writes) and ``retain_duplicates``."""

    window_size_ms: int = 0
    grace_ms: int | None = None
    retain_duplicates: bool = False

    def create(self) -> Any:
        from ..stores import Stores

        if self.retention_ms is None:
            raise ValueError(f"window store {self.name!r} needs a retention, got {self!r}")
        return Stores.in_memory_window_store(self.name, self.retention_ms, self.window_size_ms, self.grace_ms,
                                             self.retain_duplicates)

    def changelog_config(self) -> dict[str, str]:
        """``cleanup.policy=compact,delete``, ``retention.ms = retention + 24 h`` (docs/semantics.md, "Changelogs and restoration")."""
        return {"cleanup.policy": "compact,delete", "retention.ms": str((self.retention_ms or 0) + DAY_MS)}

    def describe_extra(self) -> list[str]:
        """Details shown by ``Topology.describe()`` besides the retention."""
        extra = [f"window size={self.window_size_ms} ms"]
        if self.retain_duplicates:
            extra.append("duplicates")
        return extra
