"""KStream: an unbounded stream of ``(key, value, timestamp)`` records, and its operators.

User functions receive ``(key, value)`` unless stated otherwise (``map_values``/
``flat_map_values`` receive the value; pass ``with_key=True`` for ``(key, value)``). An exception in a
user function is reported as :class:`~streamproc.errors.ProcessingError` with the record's key,
topic, partition and offset.

A key change (``map``, ``flat_map``, ``select_key``, ``group_by``) marks the stream; a following
``group_by_key()`` aggregation or ``join()`` then routes it through the repartition topic
``<application_id>-<name>-repartition`` (so records of one key meet in one task), which starts a
new sub-topology.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..processors.io import SinkProcessor, SourceProcessor
from ..processors.serdes import buffer_key_serde, buffered_value_serde
from ..processors.stateless import (
    BranchProcessor,
    FilterProcessor,
    FlatMapProcessor,
    FlatMapValuesProcessor,
    MapProcessor,
    MapValuesProcessor,
    PassThroughProcessor,
    PeekProcessor,
    SelectKeyProcessor,
)
from ..processors.table import StreamTableJoinProcessor
from ..serde import INT, STRING, Serde
from ..time import Duration, duration_ms
from .graph import Node, StoreSpec
from .options import Grouped, Joined, Produced, check_serde
from .options import check_callable as _callable
from .time_windows import JoinWindows

if TYPE_CHECKING:  # pragma: no cover
    from .builder import StreamsBuilder
    from .kgrouped import KGroupedStream
    from .ktable import KTable

__all__ = ["BranchedKStream", "KStream"]


class KStream:
    """A stream of records. Create one with :meth:`StreamsBuilder.stream`."""

    __slots__ = ("_builder", "_key_changed", "_node", "key_serde", "value_serde")

    def __init__(self, builder: StreamsBuilder, node: Node, key_serde: Serde | None,
                 value_serde: Serde | None, key_changed: bool = False) -> None:
        self._builder = builder
        self._node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._key_changed = key_changed

    @property
    def name(self) -> str:
        """Name of the operator that produces this stream."""
        return self._node.name

    def _child(self, name: str | None, prefix: str, op: str, make: Callable[[str], Any],
               key_serde: Serde | None, value_serde: Serde | None, key_changed: bool) -> KStream:
        b = self._builder
        node_name = b._new_name(name, prefix, f"{op}()")
        node = b._add_node(node_name, "processor", op, lambda: make(node_name), parents=[self._node])
        return KStream(b, node, key_serde, value_serde, key_changed)

    # -- stateless ------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Keep the records for which ``predicate(key, value)`` is true."""
        fn = _callable(predicate, "predicate", "filter")
        return self._child(name, "KSTREAM-FILTER", "filter", lambda n: FilterProcessor(n, fn),
                           self.key_serde, self.value_serde, self._key_changed)

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Drop the records for which ``predicate(key, value)`` is true."""
        fn = _callable(predicate, "predicate", "filter_not")
        return self._child(name, "KSTREAM-FILTER", "filter_not", lambda n: FilterProcessor(n, fn, negate=True),
                           self.key_serde, self.value_serde, self._key_changed)

    def map(self, mapper: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """``mapper(key, value) -> (new_key, new_value)`` (a tuple or :class:`KeyValue`). Changes the key."""
        fn = _callable(mapper, "mapper", "map")
        return self._child(name, "KSTREAM-MAP", "map", lambda n: MapProcessor(n, fn), None, None, True)

    def map_values(self, mapper: Callable[..., Any], name: str | None = None,
                   with_key: bool = False) -> KStream:
        """``mapper(value)`` (``mapper(key, value)`` with ``with_key=True``) -> new value; key kept."""
        fn = _callable(mapper, "mapper", "map_values")
        return self._child(name, "KSTREAM-MAPVALUES", "map_values", lambda n: MapValuesProcessor(n, fn, with_key),
                           self.key_serde, None, self._key_changed)

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[Any]], name: str | None = None) -> KStream:
        """``mapper(key, value) -> iterable of (key, value)``. Changes the key."""
        fn = _callable(mapper, "mapper", "flat_map")
        return self._child(name, "KSTREAM-FLATMAP", "flat_map", lambda n: FlatMapProcessor(n, fn), None, None, True)

    def flat_map_values(self, mapper: Callable[..., Iterable[Any]], name: str | None = None,
                        with_key: bool = False) -> KStream:
        """``mapper(value) -> iterable of values`` (``mapper(key, value)`` with ``with_key``); key kept."""
        fn = _callable(mapper, "mapper", "flat_map_values")
        return self._child(name, "KSTREAM-FLATMAPVALUES", "flat_map_values",
                           lambda n: FlatMapValuesProcessor(n, fn, with_key), self.key_serde, None, self._key_changed)

    def peek(self, action: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record; records pass unchanged."""
        fn = _callable(action, "action", "peek")
        return self._child(name, "KSTREAM-PEEK", "peek", lambda n: PeekProcessor(n, fn),
                           self.key_serde, self.value_serde, self._key_changed)

    def select_key(self, selector: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """New key ``selector(key, value)``; value kept. Changes the key."""
        fn = _callable(selector, "selector", "select_key")
        return self._child(name, "KSTREAM-KEY-SELECT", "select_key", lambda n: SelectKeyProcessor(n, fn),
                           None, self.value_serde, True)

    def merge(self, other: KStream, name: str | None = None) -> KStream:
        """The records of both streams (in processing order)."""
        if not isinstance(other, KStream) or other._builder is not self._builder:
            raise ValueError(f"merge() needs a KStream of the same StreamsBuilder, got {other!r}")
        b = self._builder
        node_name = b._new_name(name, "KSTREAM-MERGE", "merge()")
        node = b._add_node(node_name, "processor", "merge", lambda: PassThroughProcessor(node_name),
                           parents=[self._node, other._node])
        ks = self.key_serde if self.key_serde is other.key_serde else None
        vs = self.value_serde if self.value_serde is other.value_serde else None
        return KStream(b, node, ks, vs, self._key_changed or other._key_changed)

    def split(self, name: str | None = None) -> BranchedKStream:
        """Route each record to the first branch whose predicate holds::

            branches = stream.split(name="s").branch(is_big, name="big").default_branch(name="rest")
            branches["s-big"].to("big"); branches["s-rest"].to("other")
        """
        return BranchedKStream(self, name)

    def branch(self, *predicates: Callable[[Any, Any], Any], name: str | None = None) -> list[KStream]:
        """``[stream of predicate 0, stream of predicate 1, ...]``: each record goes to the first match."""
        if not predicates:
            raise ValueError("branch() needs at least one predicate")
        split = self.split(name)
        for i, predicate in enumerate(predicates):
            split.branch(predicate, name=str(i))
        return list(split.build().values())

    def to(self, topic: str, key_serde: Any = None, value_serde: Any = None, name: str | None = None,
           produced: Produced | None = None) -> None:
        """Write the records to ``topic`` (serialised with the serdes given, if any)."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"to() needs a non-empty topic name, got {topic!r}")
        produced = produced or Produced()
        ks = check_serde(key_serde if key_serde is not None else produced.key_serde, "key_serde", f"to({topic!r})")
        vs = check_serde(value_serde if value_serde is not None else produced.value_serde, "value_serde",
                         f"to({topic!r})")
        b = self._builder
        node_name = b._new_name(name or produced.name, "KSTREAM-SINK", f"to({topic!r})")
        b._add_node(node_name, "sink", "sink", lambda: SinkProcessor(node_name, topic, ks, vs),
                    parents=[self._node], topics=(topic,), key_serde=ks, value_serde=vs)

    # -- Processor API --------------------------------------------------------------------------------
    def process(self, processor_factory: Callable[[], Any], stores: Iterable[str] = (),
                name: str | None = None) -> KStream:
        """Run a user processor (:class:`~streamproc.processor.UserProcessor`; ``processor_factory()``
        makes one per task) with access to ``stores`` (names given to ``StreamsBuilder.add_state_store``).
        Returns the stream of what it forwards (key and value serdes unknown; the key may change)."""
        from ..processors.user import UserProcessorNode

        if not callable(processor_factory):
            raise ValueError(f"process() needs a processor factory (a UserProcessor subclass or a function "  # noqa: TRY004 - bad input is a ValueError
                             f"returning one), got {processor_factory!r}")
        missing = sorted(getattr(processor_factory, "__abstractmethods__", ()))
        if isinstance(processor_factory, type) and missing:
            raise ValueError(f"process(): {processor_factory.__name__} does not define {', '.join(missing)}; a "
                             f"UserProcessor subclass must define process(self, key, value, timestamp)")
        if isinstance(stores, str):
            raise ValueError(f"process() stores must be a list of store names, got the str {stores!r}; "  # noqa: TRY004 - bad input is a ValueError
                             f"write stores=[{stores!r}]")
        store_names = tuple(stores)
        b = self._builder
        for store in store_names:
            if store not in b._stores or b._stores[store].owner != store:
                raise ValueError(f"process() store {store!r} is not a state store of this builder; add it first "
                                 f"with StreamsBuilder.add_state_store(KeyValueStoreBuilder({store!r}, ...))")
        node_name = b._new_name(name, "KSTREAM-PROCESSOR", "process()")
        node = b._add_node(node_name, "processor", "process",
                           lambda: UserProcessorNode(node_name, processor_factory, store_names),
                           parents=[self._node], stores=store_names)
        return KStream(b, node, None, None, True)

    # -- repartitioning and grouping --------------------------------------------------------------
    def _repartitioned(self, base_name: str, key_serde: Serde | None, value_serde: Serde | None,
                       drop_null_keys: bool = True) -> KStream:
        """This stream routed through the internal topic ``<base_name>-repartition`` (records with a
        None key are dropped there unless ``drop_null_keys`` is False: a left join keeps them)."""
        b = self._builder
        topic = f"{base_name}-repartition"
        ks = b._serde(f"key of repartition topic {topic!r}", key_serde, self.key_serde)
        vs = b._serde(f"value of repartition topic {topic!r}", value_serde, self.value_serde)
        sink_name = b._new_name(f"{topic}-sink", "", "repartition sink")
        b._add_node(sink_name, "sink", "repartition-sink",
                    lambda: SinkProcessor(sink_name, topic, ks, vs, internal=True, drop_null_keys=drop_null_keys),
                    parents=[self._node], topics=(topic,), internal=True, key_serde=ks, value_serde=vs)
        source_name = b._new_name(f"{topic}-source", "", "repartition source")
        node = b._add_node(source_name, "source", "repartition-source",
                           lambda: SourceProcessor(source_name, (topic,), ks, vs, internal=True),
                           topics=(topic,), internal=True, key_serde=ks, value_serde=vs)
        return KStream(b, node, ks, vs, False)

    def repartition(self, name: str | None = None, key_serde: Any = None, value_serde: Any = None) -> KStream:
        """Route the stream through a repartition topic now (``<application_id>-<name>-repartition``)."""
        b = self._builder
        base = b._new_name(name, "KSTREAM-REPARTITION", "repartition()")
        return self._repartitioned(base, check_serde(key_serde, "key_serde", "repartition()"),
                                   check_serde(value_serde, "value_serde", "repartition()"), drop_null_keys=False)

    def group_by_key(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None,
                     grouped: Grouped | None = None) -> KGroupedStream:
        """Group by the current key. After a key change the aggregation repartitions first (topic
        ``<application_id>-<name>-repartition``, ``name`` = this ``name``/``Grouped.name`` or the
        aggregation's name)."""
        from .kgrouped import KGroupedStream

        grouped = grouped or Grouped()
        g = Grouped(
            name=name if name is not None else grouped.name,
            key_serde=check_serde(key_serde if key_serde is not None else grouped.key_serde, "key_serde",
                                  "group_by_key()"),
            value_serde=check_serde(value_serde if value_serde is not None else grouped.value_serde,
                                    "value_serde", "group_by_key()"),
        )
        return KGroupedStream(self, g)

    def group_by(self, selector: Callable[[Any, Any], Any], key_serde: Any = None, value_serde: Any = None,
                 name: str | None = None, grouped: Grouped | None = None) -> KGroupedStream:
        """``select_key(selector).group_by_key(...)``: group by a new key (always repartitions)."""
        return self.select_key(selector).group_by_key(key_serde, value_serde, name, grouped)

    # -- joins ----------------------------------------------------------------------------------
    def join(self, other: KTable | KStream | None = None, joiner: Callable[[Any, Any], Any] | None = None,
             grace: Duration | JoinWindows | None = None, name: str | None = None,
             joined: Joined | None = None, windows: JoinWindows | None = None, *,
             table: KTable | None = None) -> KStream:
        """Inner join with a table or, given :class:`JoinWindows`, with another stream.

        - ``other`` a :class:`KTable`: ``joiner(stream_value, table_value)`` for each stream record whose
          key has a table value as of the record's timestamp (versioned table) or now (key-value table).
          ``grace`` (versioned tables only, ``<=`` the history retention) buffers stream records until
          the stream has moved ``grace`` past them, so late table updates are seen. docs/semantics.md, "Versioned tables and as-of joins".
        - ``other`` a :class:`KStream`: ``join(other, joiner, JoinWindows...)`` (the windows as third
          argument or ``windows=``): ``joiner(this_value, other_value)`` for every pair of records with
          the same key within the windows; output timestamp = the later of the two. docs/windows.md.
        """
        other = _join_partner(other, table, "join")
        joiner = _callable(joiner, "joiner", "join")
        if isinstance(other, KStream):
            return self._stream_join(other, joiner, grace, windows, name, joined, "join")
        return self._join(other, joiner, self._table_grace(grace, windows, "join"), name, joined, left=False)

    def left_join(self, other: KTable | KStream | None = None, joiner: Callable[[Any, Any], Any] | None = None,
                  grace: Duration | JoinWindows | None = None, name: str | None = None,
                  joined: Joined | None = None, windows: JoinWindows | None = None, *,
                  table: KTable | None = None) -> KStream:
        """Like :meth:`join`, but every record of this stream is emitted: with a table, ``table_value``
        is None when absent; with a stream, a record that joined nothing is emitted as
        ``joiner(this_value, None)`` once its join window has closed."""
        other = _join_partner(other, table, "left_join")
        joiner = _callable(joiner, "joiner", "left_join")
        if isinstance(other, KStream):
            return self._stream_join(other, joiner, grace, windows, name, joined, "left_join")
        return self._join(other, joiner, self._table_grace(grace, windows, "left_join"), name, joined, left=True)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: JoinWindows | None = None,
                   name: str | None = None, joined: Joined | None = None) -> KStream:
        """Windowed outer join of two streams: like :meth:`left_join`, and records of ``other`` that
        joined nothing are emitted as ``joiner(None, other_value)`` once their window has closed."""
        return self._stream_join(other, joiner, windows, None, name, joined, "outer_join")

    def _stream_join(self, other: Any, joiner: Callable[[Any, Any], Any], positional: Any,
                     windows: JoinWindows | None, name: str | None, joined: Joined | None, op: str) -> KStream:
        from .stream_join import stream_stream_join

        if positional is not None and windows is not None:
            raise ValueError(f"{op}() got JoinWindows twice ({positional!r} and windows={windows!r})")
        return stream_stream_join(self, other, _callable(joiner, "joiner", op),
                                  windows if windows is not None else positional, op, name, joined)

    @staticmethod
    def _table_grace(grace: Any, windows: Any, op: str) -> Duration | None:
        if windows is not None or isinstance(grace, JoinWindows):
            raise ValueError(f"{op}() with a table takes grace= (a duration), not JoinWindows; JoinWindows are "
                             f"for joining two streams")
        return grace  # type: ignore[no-any-return]

    def _join(self, table: KTable, joiner: Callable[[Any, Any], Any], grace: Duration | None,
              name: str | None, joined: Joined | None, left: bool) -> KStream:
        from .ktable import KTable

        op = "left_join" if left else "join"
        fn = _callable(joiner, "joiner", op)
        if not isinstance(table, KTable) or table._builder is not self._builder:
            raise ValueError(f"{op}() needs a KTable of the same StreamsBuilder, got {table!r}")
        if table.windowed:
            raise ValueError(f"{op}() with a windowed KTable ({table.name!r}) is not supported; join a table "
                             f"from StreamsBuilder.table()")
        if not table.materialized:
            raise ValueError(f"{op}() of a stream with table {table.name!r} needs a table with a store (a table "
                             f"source or an aggregation); {table.name!r} is computed from its parent: write it "
                             f"to a topic with to_stream().to(topic) and join StreamsBuilder.table(topic)")
        joined = joined or Joined()
        grace = grace if grace is not None else joined.grace
        grace_ms: int | None = None
        if grace is not None:
            grace_ms = duration_ms(grace, "grace", f"{op} with table {table.name!r}")
            if table.history_retention_ms is None:
                raise ValueError(
                    f"{op}() with grace={grace_ms} ms needs a versioned table, but table {table.name!r} is not "
                    f"versioned; create it with StreamsBuilder.table(topic, versioned=history_retention)"
                )
            if grace_ms > table.history_retention_ms:
                raise ValueError(
                    f"grace of {op}() with table {table.name!r} must not exceed the table's history retention: "
                    f"got grace={grace_ms} ms, history retention={table.history_retention_ms} ms"
                )
        b = self._builder
        node_name = b._new_name(name if name is not None else joined.name,
                                "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN", f"{op}()")
        stream = self
        if self._key_changed:
            # Co-partitioning: the daemon partitions the repartition topic by the key's *bytes*, so
            # they must be the bytes the table's topic is keyed by: the table's key serde.
            key_serde = check_serde(joined.key_serde, "key_serde", op)
            if key_serde is None:
                key_serde = table.key_serde
            elif table.key_serde is not None and key_serde.name != table.key_serde.name:
                raise ValueError(
                    f"{op}() with table {table.name!r}: key_serde {key_serde.name!r} differs from the table's key "
                    f"serde {table.key_serde.name!r}; the re-keyed stream is repartitioned by its key bytes, which "
                    f"must equal the table topic's key bytes (co-partitioning). Drop key_serde (the table's is used)")
            stream = self._repartitioned(node_name, key_serde,
                                         check_serde(joined.value_serde, "value_serde", op), drop_null_keys=not left)
        stores: tuple[str, ...] = (table.store_name,)
        buffer_name = progress_name = None
        if grace_ms is not None:
            buffer_name, progress_name = f"{node_name}-buffer", f"{node_name}-progress"
            key_serde = b._serde(f"key of join buffer {buffer_name!r}", check_serde(joined.key_serde, "key_serde", op),
                                 stream.key_serde)
            b._add_store(StoreSpec(
                name=buffer_name, kind="key_value", owner=node_name, key_serde=buffer_key_serde(key_serde),
                value_serde=buffered_value_serde(b._serde(f"value of join buffer {buffer_name!r}",
                                                          check_serde(joined.value_serde, "value_serde", op),
                                                          stream.value_serde))))
            b._add_store(StoreSpec(name=progress_name, kind="key_value", owner=node_name,
                                   key_serde=STRING, value_serde=INT))
            stores += (buffer_name, progress_name)
        versioned = table.history_retention_ms is not None
        store_name = table.store_name
        node = b._add_node(
            node_name, "processor", "left-join" if left else "join",
            lambda: StreamTableJoinProcessor(node_name, store_name, fn, left, versioned, grace_ms,
                                             buffer_name, progress_name, timestamped=table.timestamped),
            parents=[stream._node], stores=stores)
        return KStream(b, node, stream.key_serde, None, False)

    def __repr__(self) -> str:
        return f"KStream({self._node.name!r})"


def _pass_through(name: str) -> Callable[[], PassThroughProcessor]:
    return lambda: PassThroughProcessor(name)


class BranchedKStream:
    """Built by :meth:`KStream.split`; ``branch()`` adds branches, ``default_branch()``/``no_default_branch()``
    finish and return ``{branch name: KStream}``. Branch names are ``<split name>-<branch name>``
    (default ``<split name>-<index>``)."""

    def __init__(self, stream: KStream, name: str | None) -> None:
        self._stream = stream
        b = stream._builder
        self._name = b._new_name(name, "KSTREAM-BRANCH", "split()")
        self._predicates: list[Callable[[Any, Any], Any] | None] = []
        self._branch_names: list[str] = []
        self._done = False

    def branch(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> BranchedKStream:
        if self._done:
            raise ValueError(f"split {self._name!r} is already finished")
        self._predicates.append(_callable(predicate, "predicate", "branch"))
        self._branch_names.append(f"{self._name}-{name if name is not None else len(self._predicates)}")
        return self

    def default_branch(self, name: str | None = None) -> dict[str, KStream]:
        """Finish: records no predicate matched go to the default branch."""
        self._predicates.append(None)
        self._branch_names.append(f"{self._name}-{name if name is not None else '0'}")
        return self.build()

    def no_default_branch(self) -> dict[str, KStream]:
        """Finish: records no predicate matched are dropped."""
        return self.build()

    def build(self) -> dict[str, KStream]:
        if self._done:
            raise ValueError(f"split {self._name!r} is already finished")
        self._done = True
        s = self._stream
        b = s._builder
        split_name = self._name
        predicates = list(self._predicates)
        node = b._add_node(split_name, "processor", "split", lambda: BranchProcessor(split_name, predicates),
                           parents=[s._node])
        out: dict[str, KStream] = {}
        for branch_name in self._branch_names:
            bname = b._new_name(branch_name, "", "branch")
            child = b._add_node(bname, "processor", "branch", _pass_through(bname), parents=[node])
            out[bname] = KStream(b, child, s.key_serde, s.value_serde, s._key_changed)
        return out


def _join_partner(other: Any, table: Any, op: str) -> Any:
    """``join(rates, ...)``, ``join(other=rates, ...)`` or ``join(table=rates, ...)`` (the name docs/semantics.md uses)."""
    if table is not None:
        if other is not None:
            raise ValueError(f"{op}() got both other={other!r} and table={table!r}; pass one")
        return table
    if other is None:
        raise ValueError(f"{op}() needs the table or stream to join with")
    return other
