"""The DSL's streams and tables: :class:`KStream` and its operators, grouped and windowed streams,
:class:`KTable` and grouped tables.

These classes are the public face of positions in the graph a
:class:`~streamproc.dsl.builder.StreamsBuilder` records: each holds a
:class:`~streamproc.dsl.graph_builder.Flow` (a stream) or a
:class:`~streamproc.dsl.table_graph.TableFlow` (a table) and checks the user's arguments; the
operators that add more than one node are recorded by :mod:`~streamproc.dsl.aggregation_graph`,
:mod:`~streamproc.dsl.join_graph` and :mod:`~streamproc.dsl.table_graph`. They live in one module
because their methods return one another (a stream groups into a grouped stream that aggregates into
a table whose updates are a stream).

User functions receive ``(key, value)`` unless stated otherwise (``map_values``/
``flat_map_values`` receive the value; pass ``with_key=True`` for ``(key, value)``). An exception in a
user function is reported as :class:`~streamproc.errors.ProcessingError` with the record's key,
topic, partition and offset.

A key change (``map``, ``flat_map``, ``select_key``, ``group_by``) marks the stream; a following
``group_by_key()`` aggregation or ``join()`` then routes it through the repartition topic
``<application_id>-<name>-repartition`` (so records of one key meet in one task), which starts a
new sub-topology.

Aggregations: ``stream.group_by_key()`` (or ``group_by(selector)``) then ``count()``, ``reduce(r)``
or ``aggregate(initializer, aggregator)`` returns a :class:`KTable` of the latest aggregate per key;
after ``windowed_by(SessionWindows...)`` (``aggregate`` also takes a merger) or
``windowed_by(TimeWindows...)`` each returns a windowed :class:`KTable` whose ``to_stream()``
carries ``(Windowed(key, start, end), aggregate)`` records (and ``None`` tombstones for merged-away
sessions with ``EmitStrategy.ON_WINDOW_UPDATE``). ``table.group_by(selector)`` regroups a table's
rows; its aggregations add a row's new pair and subtract its old one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, overload

from ..processors.session_aggregate import count_functions, reduce_functions
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
from ..processors.user import UserProcessorNode
from ..serde import INT, Serde
from ..time import Duration
from .aggregation_graph import Aggregation, TableRegrouping, add_stream_aggregation, add_table_aggregation
from .graph_builder import Flow, GraphBuilder
from .join_graph import stream_stream_join, stream_table_join
from .options import Grouped, Joined, Materialized, Produced, check_serde
from .options import check_callable as _callable
from .table_graph import TableFlow, table_filter, table_join, table_map_values, table_to_stream
from .windows import EmitStrategy, JoinWindows, SessionWindows, TimeWindows, check_emit

__all__ = ["BranchedKStream", "KGroupedStream", "KGroupedTable", "KStream", "KTable", "SessionWindowedKStream",
           "TimeWindowedKStream"]


class KStream:
    """A stream of records. Create one with :meth:`StreamsBuilder.stream`."""

    __slots__ = ("_flow", "_graph")

    def __init__(self, graph: GraphBuilder, flow: Flow) -> None:
        self._graph = graph
        self._flow = flow

    @property
    def name(self) -> str:
        """Name of the operator that produces this stream."""
        return self._flow.node.name

    @property
    def flow(self) -> Flow:
        """This stream's position in the graph (what the DSL's own modules build on)."""
        return self._flow

    @property
    def key_serde(self) -> Serde | None:
        """The serde known for this stream's keys (None: unknown)."""
        return self._flow.key_serde

    @property
    def value_serde(self) -> Serde | None:
        """The serde known for this stream's values (None: unknown)."""
        return self._flow.value_serde

    def _child(self, name: str | None, prefix: str, op: str, make: Callable[[str], Any],
               key_serde: Serde | None, value_serde: Serde | None, key_changed: bool) -> KStream:
        return KStream(self._graph, self._graph.add_processor(self._flow, name, prefix, op, make, key_serde,
                                                              value_serde, key_changed))

    def _same_builder(self, other: Any, what: str, op: str) -> Any:
        """``other`` when it is a ``what`` (KStream/KTable) of this stream's builder, else a ValueError."""
        kind = KStream if what == "KStream" else KTable
        if not isinstance(other, kind) or not self._graph.owns(other.flow.node):
            raise ValueError(f"{op}() needs a {what} of the same StreamsBuilder, got {other!r}")
        return other

    # -- stateless ------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Keep the records for which ``predicate(key, value)`` is true."""
        fn = _callable(predicate, "predicate", "filter")
        f = self._flow
        return self._child(name, "KSTREAM-FILTER", "filter", lambda n: FilterProcessor(n, fn),
                           f.key_serde, f.value_serde, f.key_changed)

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Drop the records for which ``predicate(key, value)`` is true."""
        fn = _callable(predicate, "predicate", "filter_not")
        f = self._flow
        return self._child(name, "KSTREAM-FILTER", "filter_not", lambda n: FilterProcessor(n, fn, negate=True),
                           f.key_serde, f.value_serde, f.key_changed)

    def map(self, mapper: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """``mapper(key, value) -> (new_key, new_value)`` (a tuple or :class:`KeyValue`). Changes the key."""
        fn = _callable(mapper, "mapper", "map")
        return self._child(name, "KSTREAM-MAP", "map", lambda n: MapProcessor(n, fn), None, None, True)

    def map_values(self, mapper: Callable[..., Any], name: str | None = None,
                   with_key: bool = False) -> KStream:
        """``mapper(value)`` (``mapper(key, value)`` with ``with_key=True``) -> new value; key kept."""
        fn = _callable(mapper, "mapper", "map_values")
        f = self._flow
        return self._child(name, "KSTREAM-MAPVALUES", "map_values", lambda n: MapValuesProcessor(n, fn, with_key),
                           f.key_serde, None, f.key_changed)

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[Any]], name: str | None = None) -> KStream:
        """``mapper(key, value) -> iterable of (key, value)``. Changes the key."""
        fn = _callable(mapper, "mapper", "flat_map")
        return self._child(name, "KSTREAM-FLATMAP", "flat_map", lambda n: FlatMapProcessor(n, fn), None, None, True)

    def flat_map_values(self, mapper: Callable[..., Iterable[Any]], name: str | None = None,
                        with_key: bool = False) -> KStream:
        """``mapper(value) -> iterable of values`` (``mapper(key, value)`` with ``with_key``); key kept."""
        fn = _callable(mapper, "mapper", "flat_map_values")
        f = self._flow
        return self._child(name, "KSTREAM-FLATMAPVALUES", "flat_map_values",
                           lambda n: FlatMapValuesProcessor(n, fn, with_key), f.key_serde, None, f.key_changed)

    def peek(self, action: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """Call ``action(key, value)`` for each record; records pass unchanged."""
        fn = _callable(action, "action", "peek")
        f = self._flow
        return self._child(name, "KSTREAM-PEEK", "peek", lambda n: PeekProcessor(n, fn),
                           f.key_serde, f.value_serde, f.key_changed)

    def select_key(self, selector: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        """New key ``selector(key, value)``; value kept. Changes the key."""
        fn = _callable(selector, "selector", "select_key")
        return self._child(name, "KSTREAM-KEY-SELECT", "select_key", lambda n: SelectKeyProcessor(n, fn),
                           None, self._flow.value_serde, True)

    def merge(self, other: KStream, name: str | None = None) -> KStream:
        """The records of both streams (in processing order)."""
        other = self._same_builder(other, "KStream", "merge")
        g, f, o = self._graph, self._flow, other.flow
        node_name = g.new_name(name, "KSTREAM-MERGE", "merge()")
        node = g.add_node(node_name, "processor", "merge", lambda: PassThroughProcessor(node_name),
                          parents=[f.node, o.node])
        ks = f.key_serde if f.key_serde is o.key_serde else None
        vs = f.value_serde if f.value_serde is o.value_serde else None
        return KStream(g, Flow(node, ks, vs, f.key_changed or o.key_changed))

    def split(self, name: str | None = None) -> BranchedKStream:
        """Route each record to the first branch whose predicate holds::

            branches = stream.split(name="s").branch(is_big, name="big").default_branch(name="rest")
            branches["s-big"].to("big"); branches["s-rest"].to("other")
        """
        return BranchedKStream(self._graph, self._flow, name)

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
        g = self._graph
        g.add_sink(self._flow.node, g.new_name(name or produced.name, "KSTREAM-SINK", f"to({topic!r})"), topic, ks, vs)

    # -- Processor API --------------------------------------------------------------------------------
    def process(self, processor_factory: Callable[[], Any], stores: Iterable[str] = (),
                name: str | None = None) -> KStream:
        """Run a user processor (:class:`~streamproc.processor.UserProcessor`; ``processor_factory()``
        makes one per task) with access to ``stores`` (names given to ``StreamsBuilder.add_state_store``).
        Returns the stream of what it forwards (key and value serdes unknown; the key may change)."""
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
        g = self._graph
        for store in store_names:
            spec = g.store(store)
            if spec is None or spec.owner != store:
                raise ValueError(f"process() store {store!r} is not a state store of this builder; add it first "
                                 f"with StreamsBuilder.add_state_store(KeyValueStoreBuilder({store!r}, ...))")
        node_name = g.new_name(name, "KSTREAM-PROCESSOR", "process()")
        node = g.add_node(node_name, "processor", "process",
                          lambda: UserProcessorNode(node_name, processor_factory, store_names),
                          parents=[self._flow.node], stores=store_names)
        return KStream(g, Flow(node, None, None, True))

    # -- repartitioning and grouping --------------------------------------------------------------
    def repartition(self, name: str | None = None, key_serde: Any = None, value_serde: Any = None) -> KStream:
        """Route the stream through a repartition topic now (``<application_id>-<name>-repartition``)."""
        g = self._graph
        base = g.new_name(name, "KSTREAM-REPARTITION", "repartition()")
        return KStream(g, g.repartition(self._flow, base, check_serde(key_serde, "key_serde", "repartition()"),
                                        check_serde(value_serde, "value_serde", "repartition()"),
                                        drop_null_keys=False))

    def group_by_key(self, key_serde: Any = None, value_serde: Any = None, name: str | None = None,
                     grouped: Grouped | None = None) -> KGroupedStream:
        """Group by the current key. After a key change the aggregation repartitions first (topic
        ``<application_id>-<name>-repartition``, ``name`` = this ``name``/``Grouped.name`` or the
        aggregation's name)."""
        grouped = grouped or Grouped()
        g = Grouped(
            name=name if name is not None else grouped.name,
            key_serde=check_serde(key_serde if key_serde is not None else grouped.key_serde, "key_serde",
                                  "group_by_key()"),
            value_serde=check_serde(value_serde if value_serde is not None else grouped.value_serde,
                                    "value_serde", "group_by_key()"),
        )
        return KGroupedStream(self._graph, self._flow, g)

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
        return self._join_any(other, table, joiner, grace, windows, name, joined, "join")

    def left_join(self, other: KTable | KStream | None = None, joiner: Callable[[Any, Any], Any] | None = None,
                  grace: Duration | JoinWindows | None = None, name: str | None = None,
                  joined: Joined | None = None, windows: JoinWindows | None = None, *,
                  table: KTable | None = None) -> KStream:
        """Like :meth:`join`, but every record of this stream is emitted: with a table, ``table_value``
        is None when absent; with a stream, a record that joined nothing is emitted as
        ``joiner(this_value, None)`` once its join window has closed."""
        return self._join_any(other, table, joiner, grace, windows, name, joined, "left_join")

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: JoinWindows | None = None,
                   name: str | None = None, joined: Joined | None = None) -> KStream:
        """Windowed outer join of two streams: like :meth:`left_join`, and records of ``other`` that
        joined nothing are emitted as ``joiner(None, other_value)`` once their window has closed."""
        return self._stream_join(other, joiner, windows, None, name, joined, "outer_join")

    def _join_any(self, other: Any, table: Any, joiner: Any, grace: Any, windows: JoinWindows | None,
                  name: str | None, joined: Joined | None, op: str) -> KStream:
        other = _join_partner(other, table, op)
        fn = _callable(joiner, "joiner", op)
        if isinstance(other, KStream):
            return self._stream_join(other, fn, grace, windows, name, joined, op)
        if windows is not None or isinstance(grace, JoinWindows):
            raise ValueError(f"{op}() with a table takes grace= (a duration), not JoinWindows; JoinWindows are "
                             f"for joining two streams")
        partner = self._same_builder(other, "KTable", op)
        return KStream(self._graph, stream_table_join(self._graph, self._flow, partner.flow, fn, grace, name,
                                                      joined, left=op == "left_join"))

    def _stream_join(self, other: Any, joiner: Callable[[Any, Any], Any], positional: Any,
                     windows: JoinWindows | None, name: str | None, joined: Joined | None, op: str) -> KStream:
        if positional is not None and windows is not None:
            raise ValueError(f"{op}() got JoinWindows twice ({positional!r} and windows={windows!r})")
        other = self._same_builder(other, "KStream", op)
        return KStream(self._graph, stream_stream_join(self._graph, self._flow, other.flow,
                                                       _callable(joiner, "joiner", op),
                                                       windows if windows is not None else positional, op, name,
                                                       joined))

    def __repr__(self) -> str:
        return f"KStream({self._flow.node.name!r})"


class BranchedKStream:
    """Built by :meth:`KStream.split`; ``branch()`` adds branches, ``default_branch()``/``no_default_branch()``
    finish and return ``{branch name: KStream}``. Branch names are ``<split name>-<branch name>``
    (default ``<split name>-<index>``)."""

    def __init__(self, graph: GraphBuilder, flow: Flow, name: str | None) -> None:
        self._graph = graph
        self._flow = flow
        self._name = graph.new_name(name, "KSTREAM-BRANCH", "split()")
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
        g, f = self._graph, self._flow
        split_name = self._name
        predicates = list(self._predicates)
        node = g.add_node(split_name, "processor", "split", lambda: BranchProcessor(split_name, predicates),
                          parents=[f.node])
        out: dict[str, KStream] = {}
        for branch_name in self._branch_names:
            bname = g.new_name(branch_name, "", "branch")
            child = g.add_node(bname, "processor", "branch", _pass_through(bname), parents=[node])
            out[bname] = KStream(g, Flow(child, f.key_serde, f.value_serde, f.key_changed))
        return out


def _pass_through(name: str) -> Callable[[], PassThroughProcessor]:
    return lambda: PassThroughProcessor(name)


def _join_partner(other: Any, table: Any, op: str) -> Any:
    """``join(rates, ...)``, ``join(other=rates, ...)`` or ``join(table=rates, ...)`` (the name docs/semantics.md uses)."""
    if table is not None:
        if other is not None:
            raise ValueError(f"{op}() got both other={other!r} and table={table!r}; pass one")
        return table
    if other is None:
        raise ValueError(f"{op}() needs the table or stream to join with")
    return other


class KGroupedStream:
    """A stream grouped by key (from :meth:`KStream.group_by_key` / :meth:`KStream.group_by`)."""

    __slots__ = ("_flow", "_graph", "_grouped")

    def __init__(self, graph: GraphBuilder, flow: Flow, grouped: Grouped) -> None:
        self._graph = graph
        self._flow = flow
        self._grouped = grouped

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream: ...

    def windowed_by(self, windows: SessionWindows | TimeWindows) -> SessionWindowedKStream | TimeWindowedKStream:
        """Aggregate per session window (:class:`SessionWindows`) or per time window
        (:class:`~streamproc.dsl.windows.TimeWindows`: tumbling or hopping, docs/windows.md)."""
        if isinstance(windows, TimeWindows):
            return TimeWindowedKStream(self._graph, self._flow, self._grouped, windows, EmitStrategy.ON_WINDOW_UPDATE)
        if not isinstance(windows, SessionWindows):
            raise ValueError(f"windowed_by() takes SessionWindows or TimeWindows, got {type(windows).__name__} "  # noqa: TRY004 - bad input is a ValueError
                             f"{windows!r}")
        return SessionWindowedKStream(self._graph, self._flow, self._grouped, windows, EmitStrategy.ON_WINDOW_UPDATE)

    # -- non-windowed aggregations ------------------------------------------------------------------
    def count(self, name: str | None = None, materialized: Materialized | None = None) -> KTable:
        """Number of records per key (records with a None key or value are not counted)."""
        init, agg, _ = count_functions()
        return self._aggregate(Aggregation("count", init, agg, name, materialized, known_value_serde=INT))

    def reduce(self, reducer: Callable[[Any, Any], Any], name: str | None = None,
               materialized: Materialized | None = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``reducer(agg, value)`` per key, starting from the key's first value."""
        init, agg, _ = reduce_functions(_callable(reducer, "reducer", "reduce"))
        return self._aggregate(Aggregation("reduce", init, agg, name, materialized, key_serde, value_serde,
                                           self._flow.value_serde))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  name: str | None = None, materialized: Materialized | None = None, key_serde: Any = None,
                  value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` for a new key, then ``aggregator(key, value, agg) -> agg`` per record."""
        return self._aggregate(Aggregation("aggregate", _callable(initializer, "initializer", "aggregate"),
                                           _callable(aggregator, "aggregator", "aggregate"), name, materialized,
                                           key_serde, value_serde))

    def _aggregate(self, aggregation: Aggregation) -> KTable:
        return KTable(self._graph, add_stream_aggregation(self._graph, self._flow, self._grouped, aggregation))


class _WindowedKStream:
    """What session- and time-windowed streams share: the windows, the emit strategy, ``count`` and
    ``reduce``; ``aggregate`` differs (sessions also merge)."""

    __slots__ = ("_flow", "_graph", "_grouped", "emit", "windows")

    def __init__(self, graph: GraphBuilder, flow: Flow, grouped: Grouped, windows: Any, emit: EmitStrategy) -> None:
        self._graph = graph
        self._flow = flow
        self._grouped = grouped
        self.windows = windows
        self.emit = emit

    def _aggregate(self, aggregation: Aggregation) -> KTable:
        return KTable(self._graph, add_stream_aggregation(self._graph, self._flow, self._grouped, aggregation,
                                                          self.windows, self.emit))

    def count(self, name: str | None = None, emit: EmitStrategy | None = None,
              materialized: Materialized | None = None, retention: Any = None) -> KTable:
        """Number of records per window (initializer 0, aggregator ``agg + 1``; sessions merge with ``a + b``)."""
        init, agg, merge = count_functions()
        return self._aggregate(Aggregation("count", init, agg, name, materialized, known_value_serde=INT,
                                           merger=merge, emit=emit, retention=retention))

    def reduce(self, reducer: Callable[[Any, Any], Any], name: str | None = None,
               emit: EmitStrategy | None = None, materialized: Materialized | None = None,
               retention: Any = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``reducer(agg, value)`` per window, starting from the window's first value (sessions merge
        with ``reducer(a, b)``)."""
        init, agg, merge = reduce_functions(_callable(reducer, "reducer", "reduce"))
        return self._aggregate(Aggregation("reduce", init, agg, name, materialized, key_serde, value_serde,
                                           self._flow.value_serde, merger=merge, emit=emit, retention=retention))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.windows!r}, emit={self.emit.name})"


class SessionWindowedKStream(_WindowedKStream):
    """A grouped stream windowed by sessions; ``count``/``reduce``/``aggregate`` build the operator.

    Options of the three (keywords, or a :class:`Materialized`): ``name`` (names the operator, its
    session store and changelog), ``emit`` (:class:`EmitStrategy`), ``retention`` (store retention,
    default and minimum ``gap + grace``), ``key_serde``/``value_serde`` (changelog serdes).
    """

    __slots__ = ()

    def emit_strategy(self, emit: EmitStrategy) -> SessionWindowedKStream:
        """The same windowed stream with another emit strategy."""
        return SessionWindowedKStream(self._graph, self._flow, self._grouped, self.windows, check_emit(emit))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any], name: str | None = None,
                  emit: EmitStrategy | None = None, materialized: Materialized | None = None,
                  retention: Any = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``initializer() -> agg``, ``aggregator(key, value, agg) -> agg``, ``merger(key, a, b) -> agg``."""
        return self._aggregate(Aggregation(
            "aggregate", _callable(initializer, "initializer", "aggregate"),
            _callable(aggregator, "aggregator", "aggregate"), name, materialized, key_serde, value_serde,
            merger=_callable(merger, "merger", "aggregate"), emit=emit, retention=retention))


class TimeWindowedKStream(_WindowedKStream):
    """A grouped stream windowed by time; ``count``/``reduce``/``aggregate`` build the operator.

    Options of the three (keywords, or a :class:`Materialized`): ``name`` (names the operator, its
    window store and changelog), ``emit`` (:class:`EmitStrategy`), ``retention`` (store retention,
    default and minimum ``size + grace``), ``key_serde``/``value_serde`` (changelog serdes).
    """

    __slots__ = ()

    def emit_strategy(self, emit: EmitStrategy) -> TimeWindowedKStream:
        """The same windowed stream with another emit strategy."""
        return TimeWindowedKStream(self._graph, self._flow, self._grouped, self.windows, check_emit(emit))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  name: str | None = None, emit: EmitStrategy | None = None,
                  materialized: Materialized | None = None, retention: Any = None, key_serde: Any = None,
                  value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` per new window, then ``aggregator(key, value, agg) -> agg``."""
        if callable(name):
            raise ValueError("aggregate() of time windows takes (initializer, aggregator): windows never merge, so "  # noqa: TRY004 - bad input is a ValueError
                             "there is no merger; the third argument (here a function) is the name. A merger is "
                             "for session windows: windowed_by(SessionWindows...).aggregate(init, agg, merger)")
        return self._aggregate(Aggregation("aggregate", _callable(initializer, "initializer", "aggregate"),
                                           _callable(aggregator, "aggregator", "aggregate"), name, materialized,
                                           key_serde, value_serde, emit=emit, retention=retention))


class KTable:
    """A table: from :meth:`StreamsBuilder.table`, the result of a grouped stream's ``count``/
    ``reduce``/``aggregate`` (``timestamped=True``: its store holds ``ValueAndTimestamp``), or of a
    windowed aggregation (``windowed=True``: keys are :class:`~streamproc.records.Windowed`).

    ``store_name`` is its store (also the changelog name); ``history_retention_ms`` is set for
    versioned tables.
    """

    __slots__ = ("_graph", "_table")

    def __init__(self, graph: GraphBuilder, table: TableFlow) -> None:
        self._graph = graph
        self._table = table

    @property
    def name(self) -> str:
        """The table's name (its store's name)."""
        return self._table.store_name

    @property
    def flow(self) -> TableFlow:
        """This table's position in the graph (what the DSL's own modules build on)."""
        return self._table

    @property
    def store_name(self) -> str:
        return self._table.store_name

    @property
    def key_serde(self) -> Serde | None:
        return self._table.key_serde

    @property
    def value_serde(self) -> Serde | None:
        return self._table.value_serde

    @property
    def history_retention_ms(self) -> int | None:
        return self._table.history_retention_ms

    @property
    def windowed(self) -> bool:
        return self._table.windowed

    @property
    def timestamped(self) -> bool:
        """Whether the table's store holds ``ValueAndTimestamp`` (a stream aggregation's table)."""
        return self._table.timestamped

    @property
    def materialized(self) -> bool:
        """Whether the table has its own store (table sources, aggregations); ``filter``,
        ``map_values`` and join results are computed from their parents' stores."""
        return self._table.materialized

    @property
    def versioned(self) -> bool:
        return self._table.versioned

    def queryable_store_name(self) -> str:
        return self._table.store_name

    def to_stream(self, name: str | None = None) -> KStream:
        """The stream of the table's updates: ``(key, new_value)`` (None for deletes and merged-away
        sessions). A versioned table forwards only updates that became the newest version."""
        return KStream(self._graph, table_to_stream(self._graph, self._table, name))

    # -- table operators -------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` is true; a row that stops passing is deleted
        (a ``None`` tombstone is forwarded). ``predicate`` never sees a deleted row."""
        self._table.check_operand("filter")
        fn = _callable(predicate, "predicate", "filter")
        return KTable(self._graph, table_filter(self._graph, self._table, fn, name, False, "filter"))

    def filter_not(self, predicate: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """The rows for which ``predicate(key, value)`` is false (see :meth:`filter`)."""
        self._table.check_operand("filter_not")
        fn = _callable(predicate, "predicate", "filter_not")
        return KTable(self._graph, table_filter(self._graph, self._table, fn, name, True, "filter_not"))

    def map_values(self, mapper: Callable[[Any], Any], name: str | None = None) -> KTable:
        """``mapper(value)`` of every row (a deleted row stays deleted; ``mapper`` never sees None)."""
        self._table.check_operand("map_values")
        fn = _callable(mapper, "mapper", "map_values")
        return KTable(self._graph, table_map_values(self._graph, self._table, fn, name))

    def join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Inner join with the co-partitioned table ``other``: ``joiner(this_value, other_value)`` for
        every key both tables have; a row leaves the result (tombstone) when it leaves this table."""
        return self._table_join(other, joiner, name, "join")

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Every row of this table, ``joiner(this_value, other_value or None)``."""
        return self._table_join(other, joiner, name, "left_join")

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any], name: str | None = None) -> KTable:
        """Every key of either table, ``joiner(this_value or None, other_value or None)``."""
        return self._table_join(other, joiner, name, "outer_join")

    def _table_join(self, other: Any, joiner: Callable[[Any, Any], Any], name: str | None, op: str) -> KTable:
        if not isinstance(other, KTable) or not self._graph.owns(other.flow.node):
            raise ValueError(f"{op}() of table {self.name!r} needs another KTable of the same StreamsBuilder, "
                             f"got {other!r}")
        self._table.check_operand(op)
        other.flow.check_operand(op)
        fn = _callable(joiner, "joiner", op)
        return KTable(self._graph, table_join(self._graph, self._table, other.flow, fn, name, op))

    def group_by(self, selector: Callable[[Any, Any], Any], name: str | None = None, key_serde: Any = None,
                 value_serde: Any = None) -> KGroupedTable:
        """Regroup the rows: ``selector(key, value) -> (new_key, new_value)``; the aggregations of the
        returned :class:`KGroupedTable` add a row's new pair and subtract its old one (through the
        repartition topic ``<application_id>-<name>-repartition``)."""
        self._table.check_operand("group_by")
        regrouping = TableRegrouping(self._table, _callable(selector, "selector", "group_by"), name,
                                     check_serde(key_serde, "key_serde", "group_by()"),
                                     check_serde(value_serde, "value_serde", "group_by()"))
        return KGroupedTable(self._graph, regrouping)

    def __repr__(self) -> str:
        kind = "windowed" if self.windowed else ("versioned" if self.versioned else "key-value")
        return f"KTable({self.store_name!r}, {kind})"


class KGroupedTable:
    """From :meth:`KTable.group_by`; ``count``/``reduce``/``aggregate`` return a :class:`KTable`.

    ``table.group_by(lambda k, v: (v["region"], v["amount"])).reduce(add, subtract)``: each row is in
    one group; an update subtracts the row's old pair from its old group and adds its new pair to its
    new group (one change record when the group is the same). The rows travel through the
    repartition topic ``<application_id>-<name>-repartition`` as change records ``(new, old)``.
    """

    __slots__ = ("_graph", "_regrouping")

    def __init__(self, graph: GraphBuilder, regrouping: TableRegrouping) -> None:
        self._graph = graph
        self._regrouping = regrouping

    def count(self, name: str | None = None, materialized: Materialized | None = None) -> KTable:
        """Rows per group (a group whose rows all left counts 0, as Kafka Streams)."""
        return self._build("count", lambda: 0, lambda k, v, agg: agg + 1, lambda k, v, agg: agg - 1, False, name,
                           materialized, None, INT)

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               name: str | None = None, materialized: Materialized | None = None, value_serde: Any = None) -> KTable:
        """``adder(agg, value)`` for a row joining the group (the first row's value starts it),
        ``subtractor(agg, value)`` for a row leaving it."""
        r = self._regrouping
        return self._build("reduce", None, _callable(adder, "adder", "reduce"),
                           _callable(subtractor, "subtractor", "reduce"), True, name, materialized, value_serde,
                           r.value_serde or r.table.value_serde)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any], name: str | None = None,
                  materialized: Materialized | None = None, value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` for a new group, ``adder(key, value, agg)`` for a row joining it,
        ``subtractor(key, value, agg)`` for a row leaving it."""
        return self._build("aggregate", _callable(initializer, "initializer", "aggregate"),
                           _callable(adder, "adder", "aggregate"), _callable(subtractor, "subtractor", "aggregate"),
                           False, name, materialized, value_serde, None)

    def _build(self, op: str, initializer: Callable[[], Any] | None, adder: Callable[..., Any],
               subtractor: Callable[..., Any], reduce: bool, name: str | None, materialized: Materialized | None,
               value_serde: Any, known_value_serde: Serde | None) -> KTable:
        return KTable(self._graph, add_table_aggregation(self._graph, self._regrouping, op, initializer, adder,
                                                         subtractor, reduce, name, materialized, value_serde,
                                                         known_value_serde))

    def __repr__(self) -> str:
        return f"KGroupedTable({self._regrouping.table.store_name!r})"
