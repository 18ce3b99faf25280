"""Session aggregation through the session store's session-entry operations (``find_mergeable``/
``replace_sessions``, what the operator uses on the stores a task creates) against the same operator on a store seen through its
public API only (``find_sessions``, ``remove``, ``put``): the same outputs and the same final store,
batch by batch, for both emit strategies and all three aggregations, with out-of-order, late and
merging records, and with store retentions longer than gap + grace (so a record can extend a session
that was already emitted as closed).

Changelogs: the fast path leaves out sessions created and merged away between two drains (a write
cache), so its changelog is a subset of the public path's; replaying either rebuilds the same store
and observed stream time as the live one."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder, Topology
from streamproc.engine.task import Task
from streamproc.records import Record

from .hypothesis_settings import PROPERTY

STORE = "sessions"


def topology(kind: str, gap: int, grace: int, on_close: bool, retention: int | None = None) -> Topology:
    b = StreamsBuilder()
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    windowed = b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    if kind == "count":
        table = windowed.count(name=STORE, emit=emit, retention=retention)
    elif kind == "reduce":
        table = windowed.reduce(lambda a, v: a + v, name=STORE, emit=emit, retention=retention)
    else:
        table = windowed.aggregate(list, lambda k, v, a: a + [v], lambda k, a, b: a + b, name=STORE, emit=emit,
                                   retention=retention)
    table.to_stream().to("out")
    return b.build()


class PublicOnly:
    """A store seen through its public read/write API only (not a SessionStore, and without the
    session-entry operations), so the operator falls back to ``find_sessions``/``remove``/``put``."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("find_mergeable", "replace_sessions", "session_entries"):
            raise AttributeError(name)
        return getattr(self._store, name)


def run(topo: Topology, batches: list[list[tuple[str, str, int]]], public_only: bool,
        changelogs: dict[str, list[Any]]) -> list[Any]:
    task = Task(topo, 0, 0, "t")
    if public_only:
        task.stores[STORE] = PublicOnly(task.stores[STORE])
    task.initialize()
    assert hasattr(task.processors[STORE]._replace, "__self__") is not public_only  # which path runs
    seen: list[Any] = []
    offset = 0
    for batch in batches:
        records = []
        for key, value, ts in batch:
            records.append(Record(key, value, ts, (), "in", 0, offset))
            offset += 1
        task.process("in", 0, records)
        seen.append([(o.key, o.value, o.timestamp) for o in task.drain_outputs()])
        for topic, records in task.drain_changelogs().items():
            changelogs.setdefault(topic, []).extend(records)
    inner = task.stores[STORE].inner
    seen.append([(tuple(kv.key), kv.value) for kv in inner.all()])
    seen.append((inner.observed_stream_time, len(inner), task.metrics))
    task.close()
    return seen


def restored(topo: Topology, changelogs: dict[str, list[Any]]) -> tuple[list[Any], int]:
    """The session store rebuilt from ``changelogs``: (contents, observed stream time)."""
    task = Task(topo, 0, 0, "t")
    for topic, records in changelogs.items():
        task.restore(topic, records)
    inner = task.stores[STORE].inner
    out = ([(tuple(kv.key), kv.value) for kv in inner.all()], inner.observed_stream_time)
    task.close()
    return out


def _drift(items: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    out, clock = [], 0
    for key, value, step in items:
        clock = max(0, clock + step) if step >= 0 else clock
        out.append((key, value, max(0, clock + step) if step < 0 else clock))
    return out


drifting = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "z"]), st.integers(-12, 12)),
    min_size=1, max_size=60,
).map(_drift)


@PROPERTY
@given(kind=st.sampled_from(["count", "reduce", "aggregate"]), on_close=st.booleans(),
       gap=st.integers(1, 8), grace=st.integers(0, 8), extra=st.one_of(st.none(), st.integers(1, 30)),
       inputs=drifting, batch=st.integers(1, 9))
# an overwritten session that is already in the changelog, then merged away: its tombstone is kept
@example(kind="count", on_close=False, gap=1, grace=0, extra=None,
         inputs=[("a", "x", 0), ("a", "x", 0), ("a", "x", 0), ("a", "x", 0), ("a", "x", 1)], batch=3)
def test_fast_path_equals_the_public_api_path(kind: str, on_close: bool, gap: int, grace: int, extra: int | None,
                                              inputs: list, batch: int) -> None:
    # a retention longer than gap + grace keeps closed (emitted) sessions, which a record can extend
    topo = topology(kind, gap, grace, on_close, None if extra is None else gap + grace + extra)
    batches = [inputs[i:i + batch] for i in range(0, len(inputs), batch)]
    fast_log: dict[str, list[Any]] = {}
    public_log: dict[str, list[Any]] = {}
    fast = run(topo, batches, False, fast_log)
    assert fast == run(topo, batches, True, public_log)
    store_topic = next(t for t in public_log if STORE in t and "progress" not in t) if public_log else None
    if store_topic is None:
        return
    fast_records, public_records = fast_log.get(store_topic, []), public_log[store_topic]
    assert len(fast_records) <= len(public_records)
    assert {r.key for r in fast_records} <= {r.key for r in public_records}
    live = (fast[-2], fast[-1][0])
    assert restored(topo, fast_log) == live
    assert restored(topo, public_log) == live
