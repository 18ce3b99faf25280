"""The logical graph a :class:`StreamsBuilder` records: nodes and store specifications.

A :class:`Node` is one operator of the topology with a unique name; ``make()`` creates a fresh
processor for a task. A :class:`StoreSpec` says how a task creates (and change-logs) one store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..serde import Serde

__all__ = ["DAY_MS", "KeyValueStoreBuilder", "Node", "StoreSpec", "changelog_topic_name"]

DAY_MS = 86_400_000


def changelog_topic_name(application_id: str, store_name: str) -> str:
    """``<application_id>-<store_name>-changelog`` (docs/semantics.md, "Changelogs and restoration")."""
    return f"{application_id}-{store_name}-changelog"


@dataclass(eq=False)
class Node:
    """An operator of the topology.

    ``kind`` is ``"source"``, ``"processor"`` or ``"sink"``; ``op`` a short label for describe
    (``filter``, ``session-aggregate``...). ``topics`` are the source topics or the sink topic;
    ``internal`` marks a repartition topic (named ``<application_id>-<topic>`` at run time).
    """

    index: int
    name: str
    kind: str
    op: str
    make: Callable[[], Any]
    parents: list[Node] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)
    stores: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    internal: bool = False
    key_serde: Serde | None = None
    value_serde: Serde | None = None

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op})"


@dataclass(frozen=True)
class StoreSpec:
    """How a task builds a store.

    ``kind`` in ``key_value | session | versioned``; ``retention_ms`` (session) and
    ``history_retention_ms`` (versioned) as given to the :class:`~streamproc.stores.Stores`
    factory; ``key_serde``/``value_serde`` are the changelog serdes; ``logging=False`` disables the
    changelog; ``owner`` is the name of the operator that owns the store.
    """

    name: str
    kind: str
    owner: str
    key_serde: Serde
    value_serde: Serde
    retention_ms: int | None = None
    history_retention_ms: int | None = None
    logging: bool = True

    def create(self) -> Any:
        """A new, empty in-memory store of this spec (no change-logging)."""
        from ..stores import Stores

        if self.kind == "session" and self.retention_ms is not None:
            return Stores.in_memory_session_store(self.name, self.retention_ms)
        if self.kind == "versioned" and self.history_retention_ms is not None:
            return Stores.in_memory_versioned_store(self.name, self.history_retention_ms)
        if self.kind == "key_value":
            return Stores.in_memory_key_value_store(self.name)
        raise ValueError(f"store {self.name!r}: cannot create a {self.kind!r} store from {self!r}")

    def changelog_topic(self, application_id: str) -> str:
        return changelog_topic_name(application_id, self.name)

    def changelog_config(self) -> dict[str, str]:
        """Topic configs of the changelog (docs/semantics.md, "Changelogs and restoration")."""
        if self.kind == "session":
            return {"cleanup.policy": "compact,delete",
                    "retention.ms": str((self.retention_ms or 0) + DAY_MS)}
        if self.kind == "versioned":
            return {"cleanup.policy": "compact",
                    "min.compaction.lag.ms": str((self.history_retention_ms or 0) + DAY_MS)}
        return {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class KeyValueStoreBuilder:
    """A user key-value store for :meth:`StreamsBuilder.add_state_store` (Processor API).

    ``key_serde``/``value_serde`` serialise its changelog (None: the builder's default serde);
    ``logging=False``: not change-logged (empty after a restart).
    """

    name: str
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging: bool = True
