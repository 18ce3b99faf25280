"""docs/semantics.md, "Changelogs and restoration": changelog topics, record formats and restoration (broker-less parts).

Restoration against a real broker (rebalance in the middle, progress, bad checkpoints) is covered by
tests/integration; here: the record format, the topic configs, and that replaying a store's
changelog through the put rules rebuilds the same store (contents *and* behaviour afterwards).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamproc import EmitStrategy, SessionWindows, StreamsBuilder, TopologyTestDriver, Windowed, serde
from streamproc.stores import ChangelogRecord, Stores, change_logged, changelog_topic_config

from ._util import kvs, recs
from .models import JoinModel, SessionAggModel
from .test_s4_stream_table_join import _topology, joiner

DAY = 24 * 60 * 60 * 1000


# -- topic configs and names -----------------------------------------------------------------------


def test_topic_configs() -> None:
    assert changelog_topic_config(Stores.in_memory_key_value_store("kv"))["cleanup.policy"] == "compact"
    w = changelog_topic_config(Stores.in_memory_window_store("w", 1000, 10))
    assert w["cleanup.policy"] == "compact,delete" and int(w["retention.ms"]) == 1000 + DAY
    s = changelog_topic_config(Stores.in_memory_session_store("s", 5000))
    assert s["cleanup.policy"] == "compact,delete" and int(s["retention.ms"]) == 5000 + DAY
    v = changelog_topic_config(Stores.in_memory_versioned_store("v", 7000))
    assert v["cleanup.policy"] == "compact" and int(v["min.compaction.lag.ms"]) == 7000 + DAY
    assert "delete" not in v["cleanup.policy"]


def _session_topology(key_serde: Any = None, value_serde: Any = None):
    b = StreamsBuilder()
    (b.stream("in", key_serde=key_serde, value_serde=value_serde).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count(name="counts")
     .to_stream().to("out"))
    return b.build()


def test_changelog_topic_name_and_session_record_format() -> None:
    """Topic ``<application_id>-<store>-changelog``; session key = key bytes + 8-byte end + 8-byte start;
    removed sessions are tombstones."""
    with TopologyTestDriver(_session_topology(serde.STRING, serde.STRING), application_id="app") as d:
        t = d.input_topic("in")
        t.pipe("kk", "x", 100)
        t.pipe("kk", "x", 105)
        log = d.changelog("app-counts-changelog")
        assert log == d.changelog("counts")
    by_key = [(r.key, r.value) for r in log]
    k100 = b"kk" + struct.pack(">qq", 100, 100)
    k105 = b"kk" + struct.pack(">qq", 105, 100)
    assert (k100, None) in by_key  # the merged-away session is a tombstone
    assert by_key[-1][0] == k105 and by_key[-1][1] is not None
    assert serde.INT.deserialize(by_key[-1][1]) == 2  # count() values use the int serde
    assert all(isinstance(r, ChangelogRecord) for r in log)


def test_window_record_format_with_and_without_duplicates() -> None:
    w = change_logged(Stores.in_memory_window_store("w", 1000, 10), serde.STRING, serde.STRING)
    w.put("ab", "v1", 7)
    w.put("ab", None, 8)
    recs_ = w.drain()
    assert [(r.key, r.value) for r in recs_] == [(b"ab" + struct.pack(">q", 7), b"v1"),
                                                 (b"ab" + struct.pack(">q", 8), None)]
    d = change_logged(Stores.in_memory_window_store("d", 1000, 10, retain_duplicates=True), serde.STRING, serde.STRING)
    d.put("ab", "v1", 7)
    d.put("ab", "v2", 7)
    out = d.drain()
    assert len(out) == 2
    assert all(r.key[:2] == b"ab" and len(r.key) == 2 + 8 + 4 for r in out)
    assert all(struct.unpack(">q", r.key[2:10])[0] == 7 for r in out)
    assert out[0].key[10:] != out[1].key[10:]  # each put its own sequence number
    assert [r.value for r in out] == [b"v1", b"v2"]


def test_key_value_and_versioned_record_format() -> None:
    kv = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.STRING)
    kv.put("a", "1")
    kv.delete("b")
    kv.put("c", "3")
    kv.delete("c")
    assert [(r.key, r.value) for r in kv.drain() if r.key != b"b"] == [(b"a", b"1"), (b"c", None)]
    v = change_logged(Stores.in_memory_versioned_store("v", 100), serde.STRING, serde.STRING)
    v.put("k", "a", 10)
    v.put("k", "b", 5)
    v.put("k", None, 20)
    v.delete("k", 7)
    out = v.drain()
    assert sorted((r.timestamp, r.key, r.value) for r in out) == [
        (5, b"k", b"b"), (7, b"k", None), (10, b"k", b"a"), (20, b"k", None)]


def test_dropped_writes_produce_no_record() -> None:
    w = change_logged(Stores.in_memory_window_store("w", 100, 10, grace=10))
    w.put("a", 1, 100)
    w.drain()
    w.put("a", 2, 90)  # late
    assert w.drain() == []
    v = change_logged(Stores.in_memory_versioned_store("v", 10))
    v.put("a", 1, 100)
    v.drain()
    v.put("a", 2, 50)  # NOT_PUT
    v.delete("a", 50)  # outside history
    assert v.drain() == []
    s = change_logged(Stores.in_memory_session_store("s", 10))
    s.put(Windowed("a", 100, 100), 1)
    s.drain()
    s.put(Windowed("a", 5, 5), 1)  # expired
    assert s.drain() == []


# -- restore(changelog) == state, for every store kind ----------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])
TS = st.integers(0, 80)


def _replay_equivalence(make: Callable[[], Any], ops: list[tuple], cut: list[bool], after: list[tuple],
                        apply: Callable[[Any, tuple], Any], snapshot: Callable[[Any], Any]) -> None:
    """Apply ``ops`` to a change-logged store, draining at the ``cut`` points (commits); replay all the
    drained records into a fresh store; both must hold the same state and answer ``after`` alike."""
    a = change_logged(make())
    log: list[Any] = []
    for op, c in zip(ops, cut + [False] * len(ops)):
        apply(a, op)
        if c:
            log += a.drain()
    log += a.drain()
    b = change_logged(make())
    b.restore(log)
    assert b.drain() == []  # restoring does not log again
    assert snapshot(b) == snapshot(a)
    assert b.observed_stream_time == a.observed_stream_time
    for op in after:
        assert apply(b, op) == apply(a, op), op
    assert snapshot(b) == snapshot(a)


def _window_apply(s: Any, op: tuple) -> Any:
    return s.put(*op)


def _window_snapshot(s: Any) -> Any:
    return kvs(s.all())


WINDOW_OPS = st.lists(st.tuples(KEYS, st.none() | st.integers(0, 5), TS), max_size=40)


@given(st.integers(1, 30), st.data(), st.booleans(), WINDOW_OPS, st.lists(st.booleans()), WINDOW_OPS)
def test_window_store_restore(retention: int, data: st.DataObject, dups: bool, ops: list, cut: list,
                              after: list) -> None:
    """grace >= 1: with grace 0 every put is dropped (§1) and the store's observed time, advanced by
    dropped puts only, has no effect (and no changelog record can carry it)."""
    grace = data.draw(st.integers(1, retention))
    _replay_equivalence(lambda: Stores.in_memory_window_store("w", retention, min(5, retention),
                                                              grace=grace, retain_duplicates=dups),
                        ops, cut, after, _window_apply, _window_snapshot)


SESSION_OPS = st.lists(st.tuples(KEYS, TS, st.integers(0, 10), st.none() | st.integers(0, 5)), max_size=40)


def _session_apply(s: Any, op: tuple) -> Any:
    k, start, length, agg = op
    return s.put(Windowed(k, start, start + length), agg)


@given(st.integers(0, 30), SESSION_OPS, st.lists(st.booleans()), SESSION_OPS)
def test_session_store_restore(retention: int, ops: list, cut: list, after: list) -> None:
    _replay_equivalence(lambda: Stores.in_memory_session_store("s", retention), ops, cut, after,
                        _session_apply, lambda s: kvs(s.all()))


VERSIONED_OPS = st.lists(st.tuples(st.sampled_from(["put", "delete"]), KEYS, st.none() | st.integers(0, 5), TS),
                         max_size=40)


def _versioned_apply(s: Any, op: tuple) -> Any:
    name, k, v, ts = op
    if name == "put":
        return s.put(k, v, ts)
    r = s.delete(k, ts)
    return None if r is None else tuple(r)


def _versioned_snapshot(s: Any) -> Any:
    out: list[tuple[Any, ...]] = []
    for k in ["a", "b", "c"]:
        latest = s.get(k)
        out.append((k, None if latest is None else tuple(latest)))
        for as_of in range(-1, 82):
            r = s.get(k, as_of)
            out.append((k, as_of, None if r is None else tuple(r)))
    return out


@given(st.integers(0, 40), VERSIONED_OPS, st.lists(st.booleans()), VERSIONED_OPS)
def test_versioned_store_restore(history: int, ops: list, cut: list, after: list) -> None:
    _replay_equivalence(lambda: Stores.in_memory_versioned_store("v", history), ops, cut, after,
                        _versioned_apply, _versioned_snapshot)


KV_OPS = st.lists(st.tuples(st.sampled_from(["put", "delete"]), KEYS, st.none() | st.integers(0, 5)), max_size=30)


def _kv_apply(s: Any, op: tuple) -> Any:
    name, k, v = op
    if name == "put":
        return s.put(k, v)
    return s.delete(k)


@given(KV_OPS, st.lists(st.booleans()), KV_OPS)
def test_key_value_store_restore(ops: list, cut: list, after: list) -> None:
    a = change_logged(Stores.in_memory_key_value_store("kv"))
    log: list[Any] = []
    for op, c in zip(ops, cut + [False] * len(ops)):
        _kv_apply(a, op)
        if c:
            log += a.drain()
    log += a.drain()
    b = change_logged(Stores.in_memory_key_value_store("kv"))
    b.restore(log)
    assert kvs(b.all()) == kvs(a.all())
    for op in after:
        assert _kv_apply(b, op) == _kv_apply(a, op)


# -- a task restarted from its changelogs continues like one that never stopped ---------------------

RECORDS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["p", "q"]), st.integers(0, 100)),
                   min_size=1, max_size=30)


@given(st.booleans(), RECORDS, RECORDS)
def test_session_aggregation_restart_equivalence(on_close: bool, before: list, after: list) -> None:
    """Stop after ``before``, restore a new driver from the changelogs and continue with ``after``.

    The processor's own stream time is not a store (§5 restores stores), so the first record after the
    restart is a "sync" record at the largest timestamp seen so far (of a key of its own): from then on
    the restarted task must emit exactly what the model of an uninterrupted run emits.
    """
    gap, grace = 10, 5
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    b = StreamsBuilder()
    (b.stream("in", key_serde=serde.STRING, value_serde=serde.STRING).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, x, y: x + y, name="agg", emit=emit,
                value_serde=serde.STRING)
     .to_stream().to("out"))
    topo = b.build()
    model = SessionAggModel(gap, grace, lambda: "", lambda k, v, agg: agg + v, lambda k, x, y: x + y, on_close)
    sync = ("sync", "s", max(ts for _, _, ts in before))
    with TopologyTestDriver(topo) as d:
        for r in before:
            d.input_topic("in").pipe(*r)
            model.process(*r)
        logs = d.changelogs()
        state = kvs(d.session_store("agg").all())
    with TopologyTestDriver(topo, changelogs=logs) as d2:
        assert kvs(d2.session_store("agg").all()) == state
        for r in [sync, *after]:
            d2.input_topic("in").pipe(*r)
            assert recs(d2.output_topic("out").read_records()) == model.process(*r), r


def test_restore_json_roundtrip_of_tuple_keys() -> None:
    """Default changelog serdes must round-trip the keys the stores accept (tuples included)."""
    a = change_logged(Stores.in_memory_window_store("w", 100, 10))
    a.put(("x", 1), {"n": 1}, 5)
    b = change_logged(Stores.in_memory_window_store("w", 100, 10))
    b.restore(a.drain())
    assert kvs(b.all()) == [((("x", 1), 5, 15), {"n": 1})]


JOIN_EVENTS = st.lists(st.tuples(st.sampled_from(["table", "stream"]), st.sampled_from(["a", "b"]),
                                 st.sampled_from(["p", "q"]), st.integers(0, 100)), max_size=25)


@given(st.integers(0, 30), st.booleans(), JOIN_EVENTS, JOIN_EVENTS)
def test_join_with_grace_restart_equivalence(grace: int, left: bool, before: list, after: list) -> None:
    """The versioned table and the grace buffer (with the time it has seen) are restored from their
    changelogs: a restarted join continues exactly like the model of an uninterrupted run."""
    topo = _topology(30, left, grace)
    model = JoinModel(30, left, joiner, grace)

    def step(d: TopologyTestDriver, ev: tuple) -> None:
        side, k, v, ts = ev
        d.input_topic(side).pipe(k, v, ts)
        if side == "table":
            model.table_record(k, v, ts)
            want = []
        else:
            want = model.stream_record(k, v, ts)
        assert recs(d.output_topic("out").read_records()) == want, ev

    with TopologyTestDriver(topo) as d:
        for ev in before:
            step(d, ev)
        logs = d.changelogs()
    with TopologyTestDriver(topo, changelogs=logs) as d2:
        for ev in after:
            step(d2, ev)


def test_every_store_is_changelogged_unless_disabled() -> None:
    """Session store (+ its emit-on-close progress), versioned table and the join grace buffer all get a
    changelog ``<application_id>-<store>-changelog``; ``Materialized(logging=False)`` disables it."""
    from streamproc import Materialized

    b = StreamsBuilder()
    table = b.table("table", name="tbl", versioned=100)
    s = b.stream("in")
    s.join(table, joiner, grace=10, name="j").to("joined")
    w = s.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5))
    w.count(name="logged", emit=EmitStrategy.ON_WINDOW_CLOSE).to_stream().to("o1")
    w.count(materialized=Materialized(name="unlogged", logging=False)).to_stream().to("o2")
    with TopologyTestDriver(b.build(), application_id="app") as d:
        d.input_topic("table").pipe("k", "T", 0)
        d.input_topic("in").pipe("k", "v", 1)
        logs = d.changelogs()
        assert "tbl" in logs and "logged" in logs and "unlogged" not in logs
        assert any("j" in name and name not in ("tbl", "logged") for name in logs)  # the grace buffer
        assert d.changelog("app-tbl-changelog") == logs["tbl"] != []
        assert d.changelog("app-logged-changelog") == logs["logged"] != []
        assert all(logs[name] != [] for name in logs if "buffer" in name)
