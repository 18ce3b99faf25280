"""Grouped streams, their non-windowed aggregations (docs/semantics.md, "Tables and their
aggregations") and session-window aggregations (docs/semantics.md, "Session windows").

``stream.group_by_key()`` (or ``group_by(selector)``) then ``count()``, ``reduce(r)`` or
``aggregate(initializer, aggregator)`` returns a :class:`KTable` of the latest aggregate per key.

``stream.group_by_key().windowed_by(SessionWindows...)`` then ``count()``, ``reduce(r)`` or
``aggregate(initializer, aggregator, merger)``; each returns a windowed :class:`KTable` whose
``to_stream()`` carries ``(Windowed(key, start, end), aggregate)`` records (and ``None`` tombstones
for merged-away sessions with ``EmitStrategy.ON_WINDOW_UPDATE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from ..processors.kv_aggregate import KeyValueAggregateProcessor
from ..processors.session_aggregate import SessionAggregateProcessor, count_functions, reduce_functions
from ..processors.window_aggregate import timestamped_serde
from ..serde import INT, STRING, Serde
from ..time import duration_ms
from .aggregate_builder import aggregation_input
from .graph import StoreSpec
from .options import Grouped, Materialized
from .options import check_callable as _callable
from .time_windowed import TimeWindowedKStream
from .time_windows import TimeWindows
from .windows import EmitStrategy, SessionWindows

if TYPE_CHECKING:  # pragma: no cover
    from .kstream import KStream
    from .ktable import KTable

__all__ = ["KGroupedStream", "SessionWindowedKStream"]


class KGroupedStream:
    """A stream grouped by key (from :meth:`KStream.group_by_key` / :meth:`KStream.group_by`)."""

    __slots__ = ("_grouped", "_stream")

    def __init__(self, stream: KStream, grouped: Grouped) -> None:
        self._stream = stream
        self._grouped = grouped

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream: ...

    def windowed_by(self, windows: SessionWindows | TimeWindows) -> SessionWindowedKStream | TimeWindowedKStream:
        """Aggregate per session window (:class:`SessionWindows`) or per time window
        (:class:`~streamproc.dsl.time_windows.TimeWindows`: tumbling or hopping, docs/windows.md)."""
        if isinstance(windows, TimeWindows):
            return TimeWindowedKStream(self._stream, self._grouped, windows, EmitStrategy.ON_WINDOW_UPDATE)
        if not isinstance(windows, SessionWindows):
            raise ValueError(f"windowed_by() takes SessionWindows or TimeWindows, got {type(windows).__name__} "  # noqa: TRY004 - bad input is a ValueError
                             f"{windows!r}")
        return SessionWindowedKStream(self._stream, self._grouped, windows, EmitStrategy.ON_WINDOW_UPDATE)

    # -- non-windowed aggregations ------------------------------------------------------------------
    def count(self, name: str | None = None, materialized: Materialized | None = None) -> KTable:
        """Number of records per key (records with a None key or value are not counted)."""
        init, agg, _ = count_functions()
        return self._build("count", init, agg, name, materialized, None, None, INT)

    def reduce(self, reducer: Callable[[Any, Any], Any], name: str | None = None,
               materialized: Materialized | None = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``reducer(agg, value)`` per key, starting from the key's first value."""
        init, agg, _ = reduce_functions(_callable(reducer, "reducer", "reduce"))
        return self._build("reduce", init, agg, name, materialized, key_serde, value_serde, self._stream.value_serde)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  name: str | None = None, materialized: Materialized | None = None, key_serde: Any = None,
                  value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` for a new key, then ``aggregator(key, value, agg) -> agg`` per record."""
        return self._build("aggregate", _callable(initializer, "initializer", "aggregate"),
                           _callable(aggregator, "aggregator", "aggregate"), name, materialized, key_serde,
                           value_serde, None)

    def _build(self, op: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
               name: str | None, materialized: Materialized | None, key_serde: Any, value_serde: Any,
               known_value_serde: Serde | None) -> KTable:
        from .ktable import KTable

        name, _, materialized = Materialized.from_positional(name, None, materialized, f"{op}()")
        mat = materialized or Materialized()
        if mat.retention is not None:
            raise ValueError(f"{op}() without windows keeps every key: a retention ({mat.retention!r}) has no "
                             f"meaning here; drop it from the Materialized")
        b = self._stream._builder
        node_name = b._new_name(name if name is not None else mat.name, "KSTREAM-AGGREGATE", f"{op}()")
        stream, ks, vs = aggregation_input(self._stream, self._grouped, node_name, op, "key-value", key_serde,
                                           value_serde, mat, known_value_serde)
        b._add_store(StoreSpec(name=node_name, kind="key_value", owner=node_name, key_serde=ks,
                               value_serde=timestamped_serde(vs), logging=mat.logging))
        node = b._add_node(node_name, "processor", f"stream-{op}",
                           lambda: KeyValueAggregateProcessor(node_name, node_name, initializer, aggregator),
                           parents=[stream._node], stores=(node_name,))
        return KTable(b, node, store_name=node_name, key_serde=ks, value_serde=vs, history_retention_ms=None,
                      windowed=False, timestamped=True)


class SessionWindowedKStream:
    """A grouped stream windowed by sessions; ``count``/``reduce``/``aggregate`` build the operator.

    Options of the three (keywords, or a :class:`Materialized`): ``name`` (names the operator, its
    session store and changelog), ``emit`` (:class:`EmitStrategy`), ``retention`` (store retention,
    default and minimum ``gap + grace``), ``key_serde``/``value_serde`` (changelog serdes).
    """

    __slots__ = ("_grouped", "_stream", "emit", "windows")

    def __init__(self, stream: KStream, grouped: Grouped, windows: SessionWindows, emit: EmitStrategy) -> None:
        self._stream = stream
        self._grouped = grouped
        self.windows = windows
        self.emit = emit

    def emit_strategy(self, emit: EmitStrategy) -> SessionWindowedKStream:
        """The same windowed stream with another emit strategy."""
        return SessionWindowedKStream(self._stream, self._grouped, self.windows, _check_emit(emit))

    def count(self, name: str | None = None, emit: EmitStrategy | None = None,
              materialized: Materialized | None = None, retention: Any = None) -> KTable:
        """Number of records per session (initializer 0, aggregator ``agg + 1``, merger ``a + b``)."""
        init, agg, merge = count_functions()
        return self._build("count", init, agg, merge, name, emit, materialized, retention, None, None, INT)

    def reduce(self, reducer: Callable[[Any, Any], Any], name: str | None = None,
               emit: EmitStrategy | None = None, materialized: Materialized | None = None,
               retention: Any = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``reducer(agg, value)`` per session, starting from the first value; sessions merge with
        ``reducer(a, b)``."""
        init, agg, merge = reduce_functions(_callable(reducer, "reducer", "reduce"))
        return self._build("reduce", init, agg, merge, name, emit, materialized, retention, key_serde,
                           value_serde, self._stream.value_serde)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any], name: str | None = None,
                  emit: EmitStrategy | None = None, materialized: Materialized | None = None,
                  retention: Any = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``initializer() -> agg``, ``aggregator(key, value, agg) -> agg``, ``merger(key, a, b) -> agg``."""
        return self._build("aggregate", _callable(initializer, "initializer", "aggregate"),
                           _callable(aggregator, "aggregator", "aggregate"), _callable(merger, "merger", "aggregate"),
                           name, emit, materialized, retention, key_serde, value_serde, None)

    def _build(self, op: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
               merger: Callable[[Any, Any, Any], Any], name: str | None, emit: EmitStrategy | None,
               materialized: Materialized | None, retention: Any, key_serde: Any, value_serde: Any,
               known_value_serde: Serde | None) -> KTable:
        from .ktable import KTable

        name, emit, materialized = Materialized.from_positional(name, emit, materialized, f"{op}()")
        mat = materialized or Materialized()
        emit = _check_emit(emit if emit is not None else self.emit)
        stream = self._stream
        b = stream._builder
        gap, grace = self.windows.gap_ms, self.windows.grace_ms
        node_name = b._new_name(name if name is not None else mat.name, "KSTREAM-AGGREGATE", f"{op}()")
        owner = f"session {op} {node_name!r}"
        minimum = gap + grace
        retention_arg = retention if retention is not None else mat.retention
        retention_ms = minimum
        if retention_arg is not None:
            retention_ms = duration_ms(retention_arg, "retention", owner)
            if retention_ms < minimum:
                raise ValueError(
                    f"retention of {owner} must be at least gap + grace = {gap} + {grace} = {minimum} ms, "
                    f"got {retention_ms} ms"
                )
        stream, ks, vs = aggregation_input(stream, self._grouped, node_name, op, "session", key_serde, value_serde,
                                           mat, known_value_serde)
        b._add_store(StoreSpec(name=node_name, kind="session", owner=node_name, key_serde=ks, value_serde=vs,
                               retention_ms=retention_ms, logging=mat.logging))
        stores: tuple[str, ...] = (node_name,)
        on_close = emit is EmitStrategy.ON_WINDOW_CLOSE
        progress = None
        if on_close:
            progress = f"{node_name}-progress"
            b._add_store(StoreSpec(name=progress, kind="key_value", owner=node_name, key_serde=STRING,
                                   value_serde=INT, logging=mat.logging))
            stores += (progress,)
        label = f"session-{op}" + (" (emit on window close)" if on_close else "")
        node = b._add_node(
            node_name, "processor", label,
            lambda: SessionAggregateProcessor(node_name, node_name, gap, grace, initializer, aggregator, merger,
                                              on_close, progress),
            parents=[stream._node], stores=stores)
        return KTable(b, node, store_name=node_name, key_serde=None, value_serde=vs,
                      history_retention_ms=None, windowed=True)

    def __repr__(self) -> str:
        return f"SessionWindowedKStream({self.windows!r}, emit={self.emit.name})"


def _check_emit(emit: Any) -> EmitStrategy:
    if not isinstance(emit, EmitStrategy):
        raise ValueError(f"emit must be an EmitStrategy (ON_WINDOW_UPDATE or ON_WINDOW_CLOSE), got {emit!r}")  # noqa: TRY004 - bad input is a ValueError
    return emit
