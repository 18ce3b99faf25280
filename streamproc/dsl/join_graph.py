"""How the DSL records joins of a stream: with a table (as of the record's timestamp for versioned
tables, with an optional grace buffer) and with another stream within :class:`JoinWindows`.

Stream-table join ``N`` (``KSTREAM-JOIN-<index>`` / ``KSTREAM-LEFTJOIN-<index>``): a re-keyed
stream is first repartitioned through ``<application_id>-N-repartition`` with the table's key serde
(co-partitioning); with ``grace`` the stores ``N-buffer`` and ``N-progress`` hold the records
waiting (docs/semantics.md, "Versioned tables and as-of joins").

Windowed stream-stream join (``KStream.join/left_join/outer_join(other_stream, joiner,
JoinWindows...)``); the rules are in :mod:`streamproc.processors.stream_join` and docs/windows.md.

Graph, for a join named ``N`` (the ``name=`` given, else ``KSTREAM-JOIN-<index>``,
``KSTREAM-LEFTJOIN-<index>`` or ``KSTREAM-OUTERJOIN-<index>``):

- ``N-this`` (the left stream's side) and ``N-other`` (the right stream's side), both using the
  stores ``N-this-join-store`` and ``N-other-join-store`` (window stores with duplicates, the left
  and right buffers) and, for left/outer joins, ``N-outer-shared-join-store`` (the unmatched
  records); each store is change-logged to ``<application_id>-<store>-changelog``;
- ``N``: merges both sides' results; the returned stream reads from it.

A side whose key was changed is first repartitioned through ``<application_id>-N-left-repartition``
/ ``-right-repartition`` (with the other side's key serde when it is known, so both topics are
partitioned by the same key bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..processors.serdes import buffer_key_serde, buffered_value_serde
from ..processors.stateless import PassThroughProcessor
from ..processors.stream_join import (
    LEFT,
    RIGHT,
    StreamStreamJoinProcessor,
    unmatched_key_serde,
    unmatched_value_serde,
)
from ..processors.table import StreamTableJoinProcessor
from ..serde import INT, STRING
from ..time import Duration, duration_ms
from .graph import StoreSpec, WindowStoreSpec
from .graph_builder import Flow, GraphBuilder
from .options import Joined, check_serde
from .table_graph import TableFlow
from .windows import JoinWindows

__all__ = ["join_store_retention", "stream_stream_join", "stream_table_join"]

_PREFIX = {"join": "KSTREAM-JOIN", "left_join": "KSTREAM-LEFTJOIN", "outer_join": "KSTREAM-OUTERJOIN"}


def join_store_retention(windows: JoinWindows) -> int:
    """Retention of each side's buffer: ``before + after + grace + 1`` (every record that a record
    accepted later can still join: an on-time left record at ``t >= T - after - grace`` reaches back to
    ``t - before``, a right one symmetrically; the store expires starts ``<= observed - retention``)."""
    return windows.before_ms + windows.after_ms + windows.grace_ms + 1


def stream_stream_join(graph: GraphBuilder, left: Flow, right: Flow, joiner: Callable[[Any, Any], Any],
                       windows: Any, op: str, name: str | None, joined: Joined | None) -> Flow:
    """``left`` ``op`` (``join``, ``left_join``, ``outer_join``) ``right`` within ``windows``."""
    if not isinstance(windows, JoinWindows):
        raise ValueError(f"{op}() of two streams needs JoinWindows (e.g. "  # noqa: TRY004 - bad input is a ValueError
                         f"JoinWindows.of_time_difference_and_grace(diff, grace)), got {type(windows).__name__} "
                         f"{windows!r}")
    if not callable(joiner):
        raise ValueError(f"joiner of {op}() must be callable, got {type(joiner).__name__} {joiner!r}")  # noqa: TRY004
    joined = joined or Joined()
    if joined.grace is not None:
        raise ValueError(f"{op}() of two streams takes its grace from the JoinWindows, not from Joined(grace="
                         f"{joined.grace!r})")
    b = graph
    node_name = b.new_name(name if name is not None else joined.name, _PREFIX[op], f"{op}()")
    left_outer = op in ("left_join", "outer_join")
    right_outer = op == "outer_join"

    key_serde = check_serde(joined.key_serde, "key_serde", op)
    value_serde = check_serde(joined.value_serde, "value_serde", op)
    other_value_serde = check_serde(joined.other_value_serde, "other_value_serde", op)
    this, other = left, right
    if left.key_changed:
        ks = key_serde if key_serde is not None else (None if right.key_changed else right.key_serde)
        this = b.repartition(left, f"{node_name}-left", ks, value_serde, drop_null_keys=not left_outer)
    if right.key_changed:
        ks = key_serde if key_serde is not None else this.key_serde
        other = b.repartition(right, f"{node_name}-right", ks, other_value_serde, drop_null_keys=not right_outer)

    ks = b.serde(f"key of join stores of {node_name!r}", key_serde, this.key_serde, other.key_serde)
    lvs = b.serde(f"value of join store {node_name + '-this-join-store'!r}", value_serde, this.value_serde)
    rvs = b.serde(f"value of join store {node_name + '-other-join-store'!r}", other_value_serde, other.value_serde)
    retention = join_store_retention(windows)
    left_store, right_store = f"{node_name}-this-join-store", f"{node_name}-other-join-store"
    for store_name, vs in ((left_store, lvs), (right_store, rvs)):
        b.add_store(WindowStoreSpec(name=store_name, kind="window", owner=node_name, key_serde=ks, value_serde=vs,
                                     retention_ms=retention, window_size_ms=1, retain_duplicates=True))
    stores: tuple[str, ...] = (left_store, right_store)
    unmatched: str | None = None
    if left_outer:
        unmatched = f"{node_name}-outer-shared-join-store"
        b.add_store(StoreSpec(name=unmatched, kind="key_value", owner=node_name, key_serde=unmatched_key_serde(ks),
                               value_serde=unmatched_value_serde(lvs, rvs)))
        stores += (unmatched,)

    before, after, grace = windows.before_ms, windows.after_ms, windows.grace_ms
    label = op.replace("_", "-")

    def side_processor(side: int, side_name: str, sibling: str) -> Callable[[], StreamStreamJoinProcessor]:
        return lambda: StreamStreamJoinProcessor(side_name, side, left_store, right_store, unmatched, joiner,
                                                 before, after, grace, left_outer, right_outer, sibling)

    this_name = b.new_name(f"{node_name}-this", "", f"{op}() left side")
    other_name = b.new_name(f"{node_name}-other", "", f"{op}() right side")
    this_node = b.add_node(this_name, "processor", f"{label} (left side)",
                            side_processor(LEFT, this_name, other_name), parents=[this.node], stores=stores)
    other_node = b.add_node(other_name, "processor", f"{label} (right side)",
                             side_processor(RIGHT, other_name, this_name), parents=[other.node], stores=stores)
    merge = b.add_node(node_name, "processor", f"{label}-merge", lambda: PassThroughProcessor(node_name),
                        parents=[this_node, other_node])
    out_key_serde = this.key_serde if this.key_serde is other.key_serde else None
    return Flow(merge, out_key_serde, None, False)


def stream_table_join(graph: GraphBuilder, flow: Flow, table: TableFlow, joiner: Callable[[Any, Any], Any],
                      grace: Duration | None, name: str | None, joined: Joined | None, left: bool) -> Flow:
    """Each record of ``flow`` joined with ``table``'s value for its key (as of the record's
    timestamp for a versioned table; after ``grace`` of stream time with a grace buffer)."""
    op = "left_join" if left else "join"
    if table.windowed:
        raise ValueError(f"{op}() with the windowed {table.description} is not supported; join a table "
                         f"from StreamsBuilder.table()")
    if not table.materialized:
        raise ValueError(f"{op}() of a stream with {table.description} needs a table with a store (a table "
                         f"source or an aggregation); it is computed from its parent: write it "
                         f"to a topic with to_stream().to(topic) and join StreamsBuilder.table(topic)")
    joined = joined or Joined()
    grace = grace if grace is not None else joined.grace
    grace_ms: int | None = None
    if grace is not None:
        grace_ms = duration_ms(grace, "grace", f"{op} with {table.description}")
        if table.history_retention_ms is None:
            raise ValueError(
                f"{op}() with grace={grace_ms} ms needs a versioned table, but {table.description} is not "
                f"versioned; create it with StreamsBuilder.table(topic, versioned=history_retention)"
            )
        if grace_ms > table.history_retention_ms:
            raise ValueError(
                f"grace of {op}() with {table.description} must not exceed the table's history retention: "
                f"got grace={grace_ms} ms, history retention={table.history_retention_ms} ms"
            )
    node_name = graph.new_name(name if name is not None else joined.name,
                               "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN", f"{op}()")
    if flow.key_changed:
        # Co-partitioning: the daemon partitions the repartition topic by the key's *bytes*, so
        # they must be the bytes the table's topic is keyed by: the table's key serde.
        key_serde = check_serde(joined.key_serde, "key_serde", op)
        if key_serde is None:
            key_serde = table.key_serde
        elif table.key_serde is not None and key_serde.name != table.key_serde.name:
            raise ValueError(
                f"{op}() with {table.description}: key_serde {key_serde.name!r} differs from the table's key "
                f"serde {table.key_serde.name!r}; the re-keyed stream is repartitioned by its key bytes, which "
                f"must equal the table topic's key bytes (co-partitioning). Drop key_serde (the table's is used)")
        flow = graph.repartition(flow, node_name, key_serde, check_serde(joined.value_serde, "value_serde", op),
                                 drop_null_keys=not left)
    stores: tuple[str, ...] = (table.store_name,)
    buffer_name = progress_name = None
    if grace_ms is not None:
        buffer_name, progress_name = f"{node_name}-buffer", f"{node_name}-progress"
        key_serde = graph.serde(f"key of join buffer {buffer_name!r}", check_serde(joined.key_serde, "key_serde", op),
                                flow.key_serde)
        value_serde = graph.serde(f"value of join buffer {buffer_name!r}",
                                  check_serde(joined.value_serde, "value_serde", op), flow.value_serde)
        graph.add_store(StoreSpec(name=buffer_name, kind="key_value", owner=node_name,
                                  key_serde=buffer_key_serde(key_serde), value_serde=buffered_value_serde(value_serde)))
        graph.add_store(StoreSpec(name=progress_name, kind="key_value", owner=node_name, key_serde=STRING,
                                  value_serde=INT))
        stores += (buffer_name, progress_name)
    versioned = table.history_retention_ms is not None
    store_name = table.store_name
    node = graph.add_node(
        node_name, "processor", "left-join" if left else "join",
        lambda: StreamTableJoinProcessor(node_name, store_name, joiner, left, versioned, grace_ms, buffer_name,
                                         progress_name, timestamped=table.timestamped),
        parents=[flow.node], stores=stores)
    return Flow(node, flow.key_serde, None, False)
