"""How the DSL records aggregations: one builder for every grouped-stream aggregation (non-windowed,
time-windowed, session) and one for grouped-table aggregations (docs/semantics.md, "Tables and their
aggregations", "Session windows"; docs/windows.md).

A grouped-stream aggregation named ``N`` (the ``name=`` given, else ``KSTREAM-AGGREGATE-<index>``):

- reads its input through ``<application_id>-<G>-repartition`` after a key change (``G``: the
  ``Grouped`` name, else ``N``);
- keeps its aggregates in the store ``N`` (changelog ``<application_id>-N-changelog``): a key-value
  store of ``ValueAndTimestamp`` (non-windowed), a window store of ``ValueAndTimestamp`` (time
  windows, retention at least ``size + grace``) or a session store (retention at least
  ``gap + grace``);
- with ``EmitStrategy.ON_WINDOW_CLOSE``, also the store ``N-progress`` (how far results were emitted).

Store serdes, in order: the operator's ``key_serde``/``value_serde``, the ``Materialized``'s, the
``Grouped``'s (keys), what is known of the stream (``INT`` for counts, the stream's values for
``reduce``), the builder's default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..processors.kv_aggregate import KeyValueAggregateProcessor
from ..processors.session_aggregate import SessionAggregateProcessor
from ..processors.table_aggregate import TableAggregateProcessor, TableGroupByProcessor, change_serde
from ..processors.window_aggregate import TimeWindowAggregateProcessor, timestamped_serde
from ..serde import INT, STRING, Serde
from ..time import duration_ms
from .graph import StoreSpec, WindowStoreSpec
from .graph_builder import Flow, GraphBuilder
from .options import Grouped, Materialized, check_serde
from .table_graph import TableFlow
from .windows import EmitStrategy, SessionWindows, TimeWindows, check_emit

__all__ = ["Aggregation", "add_stream_aggregation", "add_table_aggregation"]


@dataclass(frozen=True)
class Aggregation:
    """One aggregation as the user asked for it: ``op`` (``count``, ``reduce`` or ``aggregate``),
    the functions (``merger`` for sessions only), the options given, and ``known_value_serde``
    (the serde of the aggregate when the operator implies one)."""

    op: str
    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    name: str | None
    materialized: Materialized | None
    key_serde: Any = None
    value_serde: Any = None
    known_value_serde: Serde | None = None
    merger: Callable[[Any, Any, Any], Any] | None = None
    emit: EmitStrategy | None = None
    retention: Any = None


def add_stream_aggregation(graph: GraphBuilder, flow: Flow, grouped: Grouped, agg: Aggregation,
                           windows: SessionWindows | TimeWindows | None = None,
                           default_emit: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE) -> TableFlow:
    """Add aggregation ``agg`` of the grouped stream ``flow`` (per key, per time window or per
    session, as ``windows`` says): the table of its results."""
    op = agg.op
    name, emit, materialized = Materialized.from_positional(agg.name, agg.emit, agg.materialized, f"{op}()")
    mat = materialized or Materialized()
    node_name = graph.new_name(name if name is not None else mat.name, "KSTREAM-AGGREGATE", f"{op}()")
    retention_ms = _retention(windows, op, node_name, agg.retention if agg.retention is not None else mat.retention)
    store_kind = "key-value" if windows is None else ("session" if isinstance(windows, SessionWindows) else "window")
    if flow.key_changed:
        flow = graph.repartition(flow, grouped.name if grouped.name is not None else node_name, grouped.key_serde,
                                 grouped.value_serde)
    ks = graph.serde(f"key of {store_kind} store {node_name!r}", check_serde(agg.key_serde, "key_serde", f"{op}()"),
                     check_serde(mat.key_serde, "key_serde", op), grouped.key_serde, flow.key_serde)
    vs = graph.serde(f"value of {store_kind} store {node_name!r}",
                     check_serde(agg.value_serde, "value_serde", f"{op}()"),
                     check_serde(mat.value_serde, "value_serde", op), agg.known_value_serde)
    stores: tuple[str, ...] = (node_name,)
    if windows is None:
        graph.add_store(StoreSpec(name=node_name, kind="key_value", owner=node_name, key_serde=ks,
                                  value_serde=timestamped_serde(vs), logging=mat.logging))
        init, aggregate = agg.initializer, agg.aggregator
        node = graph.add_node(node_name, "processor", f"stream-{op}",
                              lambda: KeyValueAggregateProcessor(node_name, node_name, init, aggregate),
                              parents=[flow.node], stores=stores)
        return TableFlow(node, store_name=node_name, key_serde=ks, value_serde=vs, timestamped=True)

    emit = check_emit(emit if emit is not None else default_emit)
    on_close = emit is EmitStrategy.ON_WINDOW_CLOSE
    if isinstance(windows, SessionWindows):
        graph.add_store(StoreSpec(name=node_name, kind="session", owner=node_name, key_serde=ks, value_serde=vs,
                                  retention_ms=retention_ms, logging=mat.logging))
    else:
        graph.add_store(WindowStoreSpec(name=node_name, kind="window", owner=node_name, key_serde=ks,
                                        value_serde=timestamped_serde(vs), retention_ms=retention_ms,
                                        logging=mat.logging, window_size_ms=windows.size_ms))
    progress = None
    if on_close:
        progress = f"{node_name}-progress"
        graph.add_store(StoreSpec(name=progress, kind="key_value", owner=node_name, key_serde=STRING,
                                  value_serde=INT, logging=mat.logging))
        stores += (progress,)
    make = _windowed_processor(node_name, windows, agg, on_close, progress)
    if isinstance(windows, SessionWindows):
        label = f"session-{op}"
    else:
        label = f"{'tumbling' if windows.tumbling else 'hopping'}-window-{op}"
    label += " (emit on window close)" if on_close else ""
    node = graph.add_node(node_name, "processor", label, make, parents=[flow.node], stores=stores)
    return TableFlow(node, store_name=node_name, key_serde=None, value_serde=vs, windowed=True)


def _retention(windows: SessionWindows | TimeWindows | None, op: str, node_name: str, given: Any) -> int | None:
    """The store retention of a windowed aggregation: ``given`` (checked), else its minimum
    (``size + grace`` for time windows, ``gap + grace`` for sessions)."""
    if windows is None:
        if given is not None:
            raise ValueError(f"{op}() without windows keeps every key: a retention ({given!r}) has no meaning "
                             f"here; drop it from the Materialized")
        return None
    if isinstance(windows, SessionWindows):
        owner, parts, size = f"session {op} {node_name!r}", "gap + grace", windows.gap_ms
    else:
        owner, parts, size = f"time-window {op} {node_name!r}", "size + grace", windows.size_ms
    minimum = size + windows.grace_ms
    if given is None:
        return minimum
    retention_ms = duration_ms(given, "retention", owner)
    if retention_ms < minimum:
        raise ValueError(f"retention of {owner} must be at least {parts} = {size} + {windows.grace_ms} = {minimum} "
                         f"ms, got {retention_ms} ms")
    return retention_ms


def _windowed_processor(node_name: str, windows: SessionWindows | TimeWindows, agg: Aggregation, on_close: bool,
                        progress: str | None) -> Callable[[], Any]:
    init, aggregate, merger = agg.initializer, agg.aggregator, agg.merger
    if isinstance(windows, SessionWindows):
        gap, grace = windows.gap_ms, windows.grace_ms
        if merger is None:
            raise ValueError(f"session {agg.op}() {node_name!r} needs a merger")
        return lambda: SessionAggregateProcessor(node_name, node_name, gap, grace, init, aggregate, merger, on_close,
                                                 progress)
    size, advance, grace = windows.size_ms, windows.advance_ms, windows.grace_ms
    return lambda: TimeWindowAggregateProcessor(node_name, node_name, size, advance, grace, init, aggregate, on_close,
                                                progress)


@dataclass(frozen=True)
class TableRegrouping:
    """``KTable.group_by(selector, name, key_serde, value_serde)`` as given."""

    table: TableFlow
    selector: Callable[[Any, Any], Any]
    name: str | None
    key_serde: Serde | None
    value_serde: Serde | None


def add_table_aggregation(graph: GraphBuilder, regrouping: TableRegrouping, op: str,
                          initializer: Callable[[], Any] | None, adder: Callable[..., Any],
                          subtractor: Callable[..., Any], reduce: bool, name: str | None,
                          materialized: Materialized | None, value_serde: Any,
                          known_value_serde: Serde | None) -> TableFlow:
    """Aggregate a regrouped table: each row's ``(new, old)`` pair travels through
    ``<application_id>-<base>-repartition`` (``base``: the ``group_by`` name, else the aggregation's)
    to the aggregation, which subtracts the old value from its old group and adds the new one."""
    mat = materialized or Materialized()
    if mat.retention is not None:
        raise ValueError(f"{op}() of a grouped table keeps every group: a retention ({mat.retention!r}) has no "
                         f"meaning here; drop it from the Materialized")
    table = regrouping.table
    node_name = graph.new_name(name if name is not None else mat.name, "KTABLE-AGGREGATE", f"{op}()")
    base = regrouping.name if regrouping.name is not None else node_name
    select_name = graph.new_name(f"{base}-select", "", "group_by()")
    topic = f"{base}-repartition"
    ks = graph.serde(f"key of repartition topic {topic!r}", regrouping.key_serde,
                     check_serde(mat.key_serde, "key_serde", op))
    vs_in = graph.serde(f"value of repartition topic {topic!r}", regrouping.value_serde)
    vs = graph.serde(f"value of key-value store {node_name!r}", check_serde(value_serde, "value_serde", f"{op}()"),
                     check_serde(mat.value_serde, "value_serde", op), known_value_serde)
    table.enable_send_old_values()
    parent, selector = table.node.name, regrouping.selector
    select = graph.add_node(select_name, "processor", "table-group-by",
                            lambda: TableGroupByProcessor(select_name, parent, selector), parents=[table.node])
    source = graph.repartition_through(select, topic, ks, change_serde(vs_in), drop_null_keys=False)
    graph.add_store(StoreSpec(name=node_name, kind="key_value", owner=node_name, key_serde=ks,
                              value_serde=timestamped_serde(vs), logging=mat.logging))
    node = graph.add_node(node_name, "processor", f"table-{op}",
                          lambda: TableAggregateProcessor(node_name, node_name, initializer, adder, subtractor, reduce),
                          parents=[source], stores=(node_name,))
    return TableFlow(node, store_name=node_name, key_serde=ks, value_serde=vs, timestamped=True)
