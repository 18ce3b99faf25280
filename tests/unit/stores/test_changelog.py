"""Change-logging wrappers: key formats, topic configs, write buffer, timestamps, restoration."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import serde
from streamproc.records import Windowed
from streamproc.stores import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingVersionedStore,
    ChangeLoggingWindowStore,
    ChangelogRecord,
    Stores,
    change_logged,
    changelog_topic_config,
)

from .hypothesis_settings import PROPERTY
from .test_key_value_store import kv_ops
from .test_session_store import session_ops
from .test_versioned_store import versioned_ops
from .test_window_store import window_ops, window_params

DAY = 86_400_000


def be8(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


# -- key formats (docs/semantics.md, "Changelogs and restoration") ----------------------------------------------------------
def test_key_value_record_format() -> None:
    s = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT, topic="app-kv-changelog")
    assert isinstance(s, ChangeLoggingKeyValueStore) and s.changelog_topic == "app-kv-changelog"
    s.put("k", 7, timestamp=123)
    s.delete("x", timestamp=124)
    assert s.drain() == [ChangelogRecord(b"k", be8(7), 123), ChangelogRecord(b"x", None, 124)]
    assert s.drain() == []


def test_window_record_format() -> None:
    s = change_logged(Stores.in_memory_window_store("w", 1000, 10), serde.STRING, serde.STRING)
    assert isinstance(s, ChangeLoggingWindowStore)
    s.put("k", "v", 500)
    s.put("k", None, 510)
    assert s.drain() == [ChangelogRecord(b"k" + be8(500), b"v", 500), ChangelogRecord(b"k" + be8(510), None, 510)]


def test_window_with_duplicates_record_format() -> None:
    s = change_logged(Stores.in_memory_window_store("w", 1000, 10, retain_duplicates=True), serde.STRING, serde.STRING)
    s.put("k", "a", 500)
    s.put("k", "b", 500)
    recs = s.drain()
    assert [r.key for r in recs] == [b"k" + be8(500) + (1).to_bytes(4, "big"), b"k" + be8(500) + (2).to_bytes(4, "big")]
    assert [r.value for r in recs] == [b"a", b"b"]


def test_session_record_format() -> None:
    s = change_logged(Stores.in_memory_session_store("s", 1000), serde.STRING, serde.INT)
    assert isinstance(s, ChangeLoggingSessionStore)
    s.put(Windowed("k", 100, 250), 3)
    s.remove(Windowed("k", 100, 250))
    assert s.drain() == [ChangelogRecord(b"k" + be8(250) + be8(100), None, 250)]


def test_versioned_record_format_one_record_per_version() -> None:
    s = change_logged(Stores.in_memory_versioned_store("v", 100), serde.STRING, serde.STRING)
    assert isinstance(s, ChangeLoggingVersionedStore)
    s.set_record_timestamp(999)  # ignored: versioned records carry the version timestamp
    s.put("k", "a", 10)
    s.put("k", "b", 20)
    s.put("k", "c", 10)
    s.delete("k", 30)
    s.put("k", "late", -500)  # NOT_PUT: not logged
    assert s.drain() == [ChangelogRecord(b"k", b"c", 10), ChangelogRecord(b"k", b"b", 20),
                         ChangelogRecord(b"k", None, 30)]


def test_default_serdes_are_json_and_tuple_keys_round_trip() -> None:
    s = change_logged(Stores.in_memory_key_value_store("kv"))
    s.put(("user", 1), {"n": 1})
    recs = s.drain()
    assert recs == [ChangelogRecord(b'["user",1]', b'{"n":1}', -1)]
    fresh = change_logged(Stores.in_memory_key_value_store("kv"))
    assert fresh.restore(recs) == 1
    assert fresh.get(("user", 1)) == {"n": 1}


# -- write buffer ---------------------------------------------------------------------------
def test_dedup_last_write_wins_at_first_position() -> None:
    s = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    s.put("a", 1)
    s.put("b", 2)
    s.put("a", 3)
    assert s.pending_changelog_records == 2
    assert [(r.key, r.value) for r in s.drain()] == [(b"a", be8(3)), (b"b", be8(2))]
    assert s.pending_changelog_records == 0


def test_dropped_writes_are_not_logged() -> None:
    w = change_logged(Stores.in_memory_window_store("w", 100, 10, grace=10))
    w.put("a", 1, 100)
    assert w.put("a", 1, 50) is False
    s = change_logged(Stores.in_memory_session_store("s", 10))
    s.put(Windowed("a", 100, 100), 1)
    assert s.put(Windowed("a", 0, 5), 1) is False
    assert len(w.drain()) == 1 and len(s.drain()) == 1


def test_record_timestamps() -> None:
    kv = change_logged(Stores.in_memory_key_value_store("kv"))
    kv.put("a", 1)
    kv.set_record_timestamp(77)
    kv.put("b", 1)
    kv.put("c", 1, timestamp=5)
    assert [r.timestamp for r in kv.drain()] == [-1, 77, 5]
    w = change_logged(Stores.in_memory_window_store("w", 100, 10))
    w.put("a", 1, 40)
    w.put("a", 1, 30)
    w.set_record_timestamp(35)
    w.put("a", 1, 20)
    assert [r.timestamp for r in w.drain()] == [40, 40, 35]
    with pytest.raises(TypeError, match="timestamp"):
        w.set_record_timestamp("now")


def test_wrapper_delegates_state() -> None:
    inner = Stores.in_memory_window_store("w", 100, 10)
    w = change_logged(inner)
    w.put("a", 1, 100)
    assert w.inner is inner and w.name == "w" and w.kind == "window"
    assert w.observed_stream_time == 100 and w.approximate_num_entries == 1 and w.dropped_records == 0
    assert list(w.fetch("a", 0, 200)) == [(100, 1)]
    with pytest.raises(TypeError, match="already change-logged"):
        change_logged(w)
    with pytest.raises(TypeError):
        change_logged(object())
    w.close()
    assert not w.is_open and w.pending_changelog_records == 0


# -- topic configs --------------------------------------------------------------------------
def test_changelog_topic_configs() -> None:
    assert changelog_topic_config(Stores.in_memory_key_value_store("kv")) == {"cleanup.policy": "compact"}
    assert changelog_topic_config(Stores.in_memory_window_store("w", 60_000, 1000)) == {
        "cleanup.policy": "compact,delete", "retention.ms": str(60_000 + DAY)}
    assert changelog_topic_config(change_logged(Stores.in_memory_session_store("s", timedelta(hours=1)))) == {
        "cleanup.policy": "compact,delete", "retention.ms": str(3_600_000 + DAY)}
    assert changelog_topic_config(Stores.in_memory_versioned_store("v", 5000)) == {
        "cleanup.policy": "compact", "min.compaction.lag.ms": str(5000 + DAY)}
    with pytest.raises(TypeError):
        changelog_topic_config("not a store")


def test_restore_rejects_short_keys() -> None:
    w = change_logged(Stores.in_memory_window_store("w", 100, 10))
    with pytest.raises(ValueError, match="8 bytes"):
        w.restore([ChangelogRecord(b"abc", b"1", 0)])
    s = change_logged(Stores.in_memory_session_store("s", 100))
    with pytest.raises(ValueError, match="16 bytes"):
        s.restore([ChangelogRecord(b"abc", b"1", 0)])


# -- restore(changelog(ops)) equals the state after ops ----------------------------------------
def with_drains(ops: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(ops, st.lists(st.integers(0, 60), max_size=4))


def apply_logged(store: Any, ops: list, drains: list[int], run: Any) -> list[ChangelogRecord]:
    log: list[ChangelogRecord] = []
    for i, op in enumerate(ops):
        if i in drains:
            log.extend(store.drain())
        store.set_record_timestamp(i) if store.kind != "versioned" else None
        run(store, op)
    log.extend(store.drain())
    return log


def run_kv(store: Any, op: tuple) -> None:
    if op[0] in ("put", "put_if_absent", "delete"):
        getattr(store, op[0])(*op[1:])


def run_window(store: Any, op: tuple) -> None:
    if op[0] == "put":
        store.put(op[1], op[2], op[3])


def run_session(store: Any, op: tuple) -> None:
    if op[0] == "put":
        store.put(Windowed(op[1], op[2], op[2] + op[3]), op[4])
    elif op[0] == "remove":
        store.remove(Windowed(op[1], op[2], op[2] + op[3]))


def run_versioned(store: Any, op: tuple) -> None:
    if op[0] == "put":
        store.put(op[1], op[2], op[3])
    elif op[0] == "delete":
        store.delete(op[1], op[2])


@PROPERTY
@given(with_drains(kv_ops))
def test_restore_key_value(ops_drains: tuple) -> None:
    ops, drains = ops_drains
    original = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    log = apply_logged(original, ops, drains, run_kv)
    restored = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    restored.restore(log)
    assert list(restored.all()) == list(original.all())
    assert restored.pending_changelog_records == 0


@PROPERTY
@given(window_params(), with_drains(window_ops))
def test_restore_window(params: tuple, ops_drains: tuple) -> None:
    retention, size, grace, dups = params
    ops, drains = ops_drains
    original = change_logged(Stores.in_memory_window_store("w", retention, size, grace, dups))
    log = apply_logged(original, ops, drains, run_window)
    restored = change_logged(Stores.in_memory_window_store("w", retention, size, grace, dups))
    restored.restore(log)
    assert list(restored.all()) == list(original.all())
    assert restored.approximate_num_entries == original.approximate_num_entries
    if original.grace > 0:  # with grace 0 every put is dropped: stream time is not in the log
        assert restored.observed_stream_time == original.observed_stream_time
    # a restored duplicate store keeps numbering after the restored records
    if dups and log and original.put("a", 1, original.observed_stream_time):
        restored.put("a", 1, restored.observed_stream_time)
        assert restored.drain()[-1].key == original.drain()[-1].key


@PROPERTY
@given(st.integers(0, 80), with_drains(session_ops))
def test_restore_session(retention: int, ops_drains: tuple) -> None:
    ops, drains = ops_drains
    original = change_logged(Stores.in_memory_session_store("s", retention), serde.STRING, serde.INT)
    log = apply_logged(original, ops, drains, run_session)
    restored = change_logged(Stores.in_memory_session_store("s", retention), serde.STRING, serde.INT)
    restored.restore(log)
    assert list(restored.all()) == list(original.all())
    assert restored.observed_stream_time == original.observed_stream_time


@PROPERTY
@given(st.integers(0, 60), st.one_of(st.none(), st.integers(1, 40)), with_drains(versioned_ops))
def test_restore_versioned(history: int, interval: int | None, ops_drains: tuple) -> None:
    ops, drains = ops_drains
    original = change_logged(Stores.in_memory_versioned_store("v", history, interval), serde.STRING, serde.INT)
    log = apply_logged(original, ops, drains, run_versioned)
    restored = change_logged(Stores.in_memory_versioned_store("v", history, interval), serde.STRING, serde.INT)
    restored.restore(log)
    assert restored.observed_stream_time == original.observed_stream_time
    for key in ["a", "b", "c", "d", "e"]:
        assert restored.get(key) == original.get(key)
        for as_of in range(-2, 215):
            assert restored.get(key, as_of) == original.get(key, as_of), (key, as_of)


def _session_state(store: Any) -> tuple[list[Any], int]:
    return [(tuple(kv.key), kv.value) for kv in store.inner.all()], store.inner.observed_stream_time


def _restored_session_store(log: list[Any]) -> Any:
    s = change_logged(Stores.in_memory_session_store("s", 1_000), serde.STRING, serde.INT, topic="app-s-changelog")
    s.restore(log)
    return s


def test_session_fast_path_elides_only_sessions_created_since_the_last_drain() -> None:
    """Session aggregation's ``find_mergeable``/``replace_sessions`` leave out a session created and merged
    away between two drains, but never the tombstone of a session the changelog already holds -
    not even when that window is created again and merged away again before the drain."""
    s = change_logged(Stores.in_memory_session_store("s", 1_000), serde.STRING, serde.INT, topic="app-s-changelog")
    log: list[Any] = []

    def click(ts: int, gap: int = 5) -> None:
        found = s.find_mergeable("a", ts, gap)
        start = min([ts] + [e[1] for e in found])
        end = max([ts] + [e[0] for e in found])
        s.replace_sessions("a", found, start, end, 1 + sum(e[2] for e in found))

    click(0)
    drained = s.drain()
    assert [(r.key, r.value) for r in drained] == [(b"a" + be8(0) + be8(0), b"\x00" * 7 + b"\x01")]
    log += drained

    click(3)                     # merges [0,0] (in the changelog: tombstone) into [0,3] (new)
    click(6)                     # merges [0,3] (created since the drain: elided) into [0,6]
    drained = s.drain()
    assert [(r.key, r.value is None) for r in drained] == [(b"a" + be8(0) + be8(0), True),
                                                          (b"a" + be8(6) + be8(0), False)]
    log += drained
    assert _session_state(_restored_session_store(log)) == _session_state(s)

    # [0,6] is in the changelog; remove it through the public API, create [0,6] again, merge it away
    s.remove(Windowed("a", 0, 6))
    for ts in (0, 5, 6, 9):      # [0,0] -> [0,5] -> [0,6] (that window again) -> [0,9]
        click(ts)
    drained = s.drain()
    assert (b"a" + be8(6) + be8(0), True) in [(r.key, r.value is None) for r in drained]
    log += drained
    assert _session_state(_restored_session_store(log)) == _session_state(s)
    assert [kv.key for kv in s.inner.all()] == [Windowed("a", 0, 9)]


@pytest.mark.parametrize("dups", [False, True])
def test_window_grace_zero_drop_that_advances_time_is_restored(dups: bool) -> None:
    """With grace 0 every put is dropped, yet it advances the observed time: a tombstone of its
    window carries that time to a restore (contents stay empty either way)."""
    live = change_logged(Stores.in_memory_window_store("w", 5, 4, grace=0, retain_duplicates=dups))
    assert live.put("k", 1, 20) is False
    assert live.put("k", 1, 10) is False          # late: no record, no time change
    records = live.drain()
    assert [r.value for r in records] == [None]
    fresh = change_logged(Stores.in_memory_window_store("w", 5, 4, grace=0, retain_duplicates=dups))
    fresh.restore(records)
    assert fresh.inner.observed_stream_time == live.inner.observed_stream_time == 20
    assert list(fresh.all()) == list(live.all()) == []
