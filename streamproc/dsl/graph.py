"""The logical graph a :class:`StreamsBuilder` records: nodes and store specifications.

A :class:`Node` is one operator of the topology with a unique name; ``make()`` creates a fresh
processor for a task. A :class:`StoreSpec` says how a task creates (and change-logs) one store; a
:class:`WindowStoreSpec` (KIP-428 window store, for time-window aggregations and stream-stream
joins) also carries the window size, the store's grace and whether it retains duplicates. The
engine (tasks, the daemon's topic creation, restoration) handles every spec the same way: it creates
the store, wraps it for change-logging (``<application_id>-<name>-changelog``) and restores it from
that topic. The changelog's topic configs come from the store itself
(:func:`streamproc.stores.changelog_topic_config`), so they are declared once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..serde import Serde
from ..stores import Stores, changelog_topic_config

__all__ = ["KeyValueStoreBuilder", "Node", "StoreSpec", "SubTopology", "WindowStoreSpec", "changelog_topic_name"]


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
        """Topic configs of the changelog: those its store needs (docs/semantics.md, "Changelogs and
        restoration")."""
        return changelog_topic_config(self.create())

    def describe_extra(self) -> list[str]:
        """Details shown by ``Topology.describe()`` besides the retention."""
        return []


@dataclass(frozen=True)
class WindowStoreSpec(StoreSpec):
    """A window store: ``retention_ms``, ``window_size_ms``, ``grace_ms`` (None: the retention, so the
    store itself only rejects expired writes) and ``retain_duplicates`` (stream-stream join buffers;
    the changelog key then carries a sequence number)."""

    window_size_ms: int = 0
    grace_ms: int | None = None
    retain_duplicates: bool = False

    def create(self) -> Any:
        if self.retention_ms is None:
            raise ValueError(f"window store {self.name!r} needs a retention, got {self!r}")
        return Stores.in_memory_window_store(self.name, self.retention_ms, self.window_size_ms, self.grace_ms,
                                             self.retain_duplicates)

    def describe_extra(self) -> list[str]:
        extra = [f"window size={self.window_size_ms} ms"]
        if self.retain_duplicates:
            extra.append("duplicates")
        return extra


@dataclass(frozen=True)
class SubTopology:
    """One connected part of a topology (topic names resolved for one application id).

    ``source_topics``/``sink_topics`` include repartition topics, which are also listed in
    ``repartition_topics``. ``changelog_topics`` maps store name to changelog topic (stores with
    logging disabled are absent). ``changelog_configs`` maps changelog topic to its topic configs.
    """

    id: int
    nodes: tuple[str, ...]
    source_topics: frozenset[str]
    sink_topics: frozenset[str]
    repartition_topics: frozenset[str]
    store_names: frozenset[str]
    stores: tuple[StoreSpec, ...]
    changelog_topics: dict[str, str]
    changelog_configs: dict[str, dict[str, str]]


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
