"""Time-windowed aggregations: ``group_by_key().windowed_by(TimeWindows...)`` then ``count()``,
``reduce(r)`` or ``aggregate(initializer, aggregator)`` (docs/windows.md).

Each returns a windowed :class:`KTable` whose ``to_stream()`` carries
``(Windowed(key, start, start + size), aggregate)`` records. The aggregation's window store has the
operator's name (changelog ``<application_id>-<name>-changelog``) and holds
:class:`~streamproc.processors.window_aggregate.ValueAndTimestamp` values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..processors.session_aggregate import count_functions, reduce_functions
from ..processors.window_aggregate import TimeWindowAggregateProcessor, timestamped_serde
from ..serde import INT, STRING, Serde
from ..time import duration_ms
from .aggregate_builder import aggregation_input
from .graph import StoreSpec
from .options import Grouped, Materialized
from .options import check_callable as _callable
from .time_windows import TimeWindows
from .window_store_spec import WindowStoreSpec
from .windows import EmitStrategy
from .windows import check_emit as _check_emit

if TYPE_CHECKING:  # pragma: no cover
    from .kstream import KStream
    from .ktable import KTable

__all__ = ["TimeWindowedKStream"]


class TimeWindowedKStream:
    """A grouped stream windowed by time; ``count``/``reduce``/``aggregate`` build the operator.

    Options of the three (keywords, or a :class:`Materialized`): ``name`` (names the operator, its
    window store and changelog), ``emit`` (:class:`EmitStrategy`), ``retention`` (store retention,
    default and minimum ``size + grace``), ``key_serde``/``value_serde`` (changelog serdes).
    """

    __slots__ = ("_grouped", "_stream", "emit", "windows")

    def __init__(self, stream: KStream, grouped: Grouped, windows: TimeWindows, emit: EmitStrategy) -> None:
        self._stream = stream
        self._grouped = grouped
        self.windows = windows
        self.emit = emit

    def emit_strategy(self, emit: EmitStrategy) -> TimeWindowedKStream:
        """The same windowed stream with another emit strategy."""
        return TimeWindowedKStream(self._stream, self._grouped, self.windows, _check_emit(emit))

    def count(self, name: str | None = None, emit: EmitStrategy | None = None,
              materialized: Materialized | None = None, retention: Any = None) -> KTable:
        """Number of records per window (initializer 0, aggregator ``agg + 1``)."""
        init, agg, _ = count_functions()
        return self._build("count", init, agg, name, emit, materialized, retention, None, None, INT)

    def reduce(self, reducer: Callable[[Any, Any], Any], name: str | None = None,
               emit: EmitStrategy | None = None, materialized: Materialized | None = None,
               retention: Any = None, key_serde: Any = None, value_serde: Any = None) -> KTable:
        """``reducer(agg, value)`` per window, starting from the window's first value."""
        init, agg, _ = reduce_functions(_callable(reducer, "reducer", "reduce"))
        return self._build("reduce", init, agg, name, emit, materialized, retention, key_serde, value_serde,
                           self._stream.value_serde)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  name: str | None = None, emit: EmitStrategy | None = None,
                  materialized: Materialized | None = None, retention: Any = None, key_serde: Any = None,
                  value_serde: Any = None) -> KTable:
        """``initializer() -> agg`` per new window, then ``aggregator(key, value, agg) -> agg``."""
        return self._build("aggregate", _callable(initializer, "initializer", "aggregate"),
                           _callable(aggregator, "aggregator", "aggregate"), name, emit, materialized, retention,
                           key_serde, value_serde, None)

    def _build(self, op: str, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
               name: str | None, emit: EmitStrategy | None, materialized: Materialized | None, retention: Any,
               key_serde: Any, value_serde: Any, known_value_serde: Serde | None) -> KTable:
        from .ktable import KTable

        name, emit, materialized = Materialized.from_positional(name, emit, materialized, f"{op}()")
        mat = materialized or Materialized()
        emit = _check_emit(emit if emit is not None else self.emit)
        stream = self._stream
        b = stream._builder
        size, advance, grace = self.windows.size_ms, self.windows.advance_ms, self.windows.grace_ms
        node_name = b._new_name(name if name is not None else mat.name, "KSTREAM-AGGREGATE", f"{op}()")
        owner = f"time-window {op} {node_name!r}"
        minimum = size + grace
        retention_arg = retention if retention is not None else mat.retention
        retention_ms = minimum
        if retention_arg is not None:
            retention_ms = duration_ms(retention_arg, "retention", owner)
            if retention_ms < minimum:
                raise ValueError(
                    f"retention of {owner} must be at least size + grace = {size} + {grace} = {minimum} ms, "
                    f"got {retention_ms} ms")
        stream, ks, vs = aggregation_input(stream, self._grouped, node_name, op, "window", key_serde, value_serde,
                                           mat, known_value_serde)
        b._add_store(WindowStoreSpec(name=node_name, kind="window", owner=node_name, key_serde=ks,
                                     value_serde=timestamped_serde(vs), retention_ms=retention_ms,
                                     logging=mat.logging, window_size_ms=size))
        stores: tuple[str, ...] = (node_name,)
        on_close = emit is EmitStrategy.ON_WINDOW_CLOSE
        progress = None
        if on_close:
            progress = f"{node_name}-progress"
            b._add_store(StoreSpec(name=progress, kind="key_value", owner=node_name, key_serde=STRING,
                                   value_serde=INT, logging=mat.logging))
            stores += (progress,)
        kind = "tumbling" if self.windows.tumbling else "hopping"
        label = f"{kind}-window-{op}" + (" (emit on window close)" if on_close else "")
        node = b._add_node(
            node_name, "processor", label,
            lambda: TimeWindowAggregateProcessor(node_name, node_name, size, advance, grace, initializer,
                                                 aggregator, on_close, progress),
            parents=[stream._node], stores=stores)
        return KTable(b, node, store_name=node_name, key_serde=None, value_serde=vs,
                      history_retention_ms=None, windowed=True)

    def __repr__(self) -> str:
        return f"TimeWindowedKStream({self.windows!r}, emit={self.emit.name})"
