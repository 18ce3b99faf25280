"""Building a windowed stream-stream join (``KStream.join/left_join/outer_join(other_stream, joiner,
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
from typing import TYPE_CHECKING, Any

from ..processors.stateless import PassThroughProcessor
from ..processors.stream_join import (
    LEFT,
    RIGHT,
    StreamStreamJoinProcessor,
    unmatched_key_serde,
    unmatched_value_serde,
)
from .graph import StoreSpec
from .options import Joined, check_serde
from .time_windows import JoinWindows
from .window_store_spec import WindowStoreSpec

if TYPE_CHECKING:  # pragma: no cover
    from .kstream import KStream

__all__ = ["join_store_retention", "stream_stream_join"]

_PREFIX = {"join": "KSTREAM-JOIN", "left_join": "KSTREAM-LEFTJOIN", "outer_join": "KSTREAM-OUTERJOIN"}


def join_store_retention(windows: JoinWindows) -> int:
    """Retention of each side's buffer: ``before + after + grace + 1`` (every record that a record
    accepted later can still join: an on-time left record at ``t >= T - after - grace`` reaches back to
    ``t - before``, a right one symmetrically; the store expires starts ``<= observed - retention``)."""
    return windows.before_ms + windows.after_ms + windows.grace_ms + 1


def stream_stream_join(left: KStream, right: Any, joiner: Callable[[Any, Any], Any], windows: Any, op: str,
                       name: str | None, joined: Joined | None) -> KStream:
    """``left`` ``op`` (``join``, ``left_join``, ``outer_join``) ``right`` within ``windows``."""
    from .kstream import KStream

    if not isinstance(right, KStream) or right._builder is not left._builder:
        raise ValueError(f"{op}() needs a KStream of the same StreamsBuilder, got {right!r}")
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
    b = left._builder
    node_name = b._new_name(name if name is not None else joined.name, _PREFIX[op], f"{op}()")
    left_outer = op in ("left_join", "outer_join")
    right_outer = op == "outer_join"

    key_serde = check_serde(joined.key_serde, "key_serde", op)
    value_serde = check_serde(joined.value_serde, "value_serde", op)
    other_value_serde = check_serde(joined.other_value_serde, "other_value_serde", op)
    this, other = left, right
    if left._key_changed:
        ks = key_serde if key_serde is not None else (None if right._key_changed else right.key_serde)
        this = left._repartitioned(f"{node_name}-left", ks, value_serde, drop_null_keys=not left_outer)
    if right._key_changed:
        ks = key_serde if key_serde is not None else this.key_serde
        other = right._repartitioned(f"{node_name}-right", ks, other_value_serde, drop_null_keys=not right_outer)

    ks = b._serde(f"key of join stores of {node_name!r}", key_serde, this.key_serde, other.key_serde)
    lvs = b._serde(f"value of join store {node_name + '-this-join-store'!r}", value_serde, this.value_serde)
    rvs = b._serde(f"value of join store {node_name + '-other-join-store'!r}", other_value_serde, other.value_serde)
    retention = join_store_retention(windows)
    left_store, right_store = f"{node_name}-this-join-store", f"{node_name}-other-join-store"
    for store_name, vs in ((left_store, lvs), (right_store, rvs)):
        b._add_store(WindowStoreSpec(name=store_name, kind="window", owner=node_name, key_serde=ks, value_serde=vs,
                                     retention_ms=retention, window_size_ms=1, retain_duplicates=True))
    stores: tuple[str, ...] = (left_store, right_store)
    unmatched: str | None = None
    if left_outer:
        unmatched = f"{node_name}-outer-shared-join-store"
        b._add_store(StoreSpec(name=unmatched, kind="key_value", owner=node_name, key_serde=unmatched_key_serde(ks),
                               value_serde=unmatched_value_serde(lvs, rvs)))
        stores += (unmatched,)

    before, after, grace = windows.before_ms, windows.after_ms, windows.grace_ms
    label = op.replace("_", "-")

    def side_processor(side: int, side_name: str, sibling: str) -> Callable[[], StreamStreamJoinProcessor]:
        return lambda: StreamStreamJoinProcessor(side_name, side, left_store, right_store, unmatched, joiner,
                                                 before, after, grace, left_outer, right_outer, sibling)

    this_name = b._new_name(f"{node_name}-this", "", f"{op}() left side")
    other_name = b._new_name(f"{node_name}-other", "", f"{op}() right side")
    this_node = b._add_node(this_name, "processor", f"{label} (left side)",
                            side_processor(LEFT, this_name, other_name), parents=[this._node], stores=stores)
    other_node = b._add_node(other_name, "processor", f"{label} (right side)",
                             side_processor(RIGHT, other_name, this_name), parents=[other._node], stores=stores)
    merge = b._add_node(node_name, "processor", f"{label}-merge", lambda: PassThroughProcessor(node_name),
                        parents=[this_node, other_node])
    out_key_serde = this.key_serde if this.key_serde is other.key_serde else None
    return KStream(b, merge, out_key_serde, None, False)
