"""KTable: a changelog stream seen as a table (latest value per key, or versions of it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..processors.stateless import PassThroughProcessor
from ..serde import Serde
from .graph import Node

if TYPE_CHECKING:  # pragma: no cover
    from .builder import StreamsBuilder
    from .kstream import KStream

__all__ = ["KTable"]


class KTable:
    """A table: from :meth:`StreamsBuilder.table`, the result of a grouped stream's ``count``/
    ``reduce``/``aggregate`` (``timestamped=True``: its store holds ``ValueAndTimestamp``), or of a
    windowed aggregation (``windowed=True``: keys are :class:`~streamproc.records.Windowed`).

    ``store_name`` is its store (also the changelog name); ``history_retention_ms`` is set for
    versioned tables.
    """

    __slots__ = ("_builder", "_node", "history_retention_ms", "key_serde", "store_name", "timestamped", "value_serde", "windowed")

    def __init__(self, builder: StreamsBuilder, node: Node, store_name: str, key_serde: Serde | None,
                 value_serde: Serde | None, history_retention_ms: int | None, windowed: bool, timestamped: bool = False) -> None:
        self._builder = builder
        self._node = node
        self.store_name = store_name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.history_retention_ms = history_retention_ms
        self.windowed = windowed
        #: the store holds ``ValueAndTimestamp`` (a stream aggregation's table)
        self.timestamped = timestamped

    @property
    def name(self) -> str:
        """The table's name (its store's name)."""
        return self.store_name

    @property
    def versioned(self) -> bool:
        return self.history_retention_ms is not None

    def queryable_store_name(self) -> str:
        return self.store_name

    def to_stream(self, name: str | None = None) -> KStream:
        """The stream of the table's updates: ``(key, new_value)`` (None for deletes and merged-away
        sessions). A versioned table forwards only updates that became the newest version."""
        from .kstream import KStream

        b = self._builder
        node_name = b._new_name(name, "KTABLE-TOSTREAM", "to_stream()")
        node = b._add_node(node_name, "processor", "to_stream", lambda: PassThroughProcessor(node_name),
                           parents=[self._node])
        return KStream(b, node, None if self.windowed else self.key_serde, self.value_serde, False)

    def __repr__(self) -> str:
        kind = "windowed" if self.windowed else ("versioned" if self.versioned else "key-value")
        return f"KTable({self.store_name!r}, {kind})"
