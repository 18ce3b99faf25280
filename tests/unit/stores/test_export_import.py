"""``export_records()`` / ``import_records(records)`` of every store kind (docs/stores.md, "What every
store has"): the exported tuples are the arguments of ``put`` in an order that rebuilds the store;
importing them into an empty store with the same parameters gives the same contents (and the same
observed stream time whenever the newest window/session/version is still held), and exporting the
rebuilt store gives the same tuples again. Also the change-logging wrappers' ``restore``, which
imports through ``import_records``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import serde
from streamproc.records import Windowed
from streamproc.stores import Stores, change_logged

from .hypothesis_settings import PROPERTY
from .strategies import keys, present_values, times, values

lengths = st.integers(0, 30)


def window_rows(store: Any) -> list[tuple[Any, int, Any]]:
    return [(kv.key.key, kv.key.start, kv.value) for kv in store.all()]


def session_rows(store: Any) -> list[tuple[Any, int, int, Any]]:
    return [(kv.key.key, kv.key.start, kv.key.end, kv.value) for kv in store.all()]


def all_versions(store: Any) -> dict[Any, list[Any]]:
    return {k: store.versions(k) for k in store.keys()}  # noqa: SIM118 - a store, not a dict


# -- key-value ---------------------------------------------------------------------------------

def test_key_value_export_is_put_arguments_in_key_order() -> None:
    s = Stores.in_memory_key_value_store("kv")
    for k, v in [("b", 2), ("a", 1), ("c", 3), ("b", 20)]:
        s.put(k, v)
    s.delete("c")
    assert s.export_records() == [("a", 1), ("b", 20)]
    fresh = Stores.in_memory_key_value_store("kv")
    assert fresh.import_records(s.export_records()) == 2
    assert [(kv.key, kv.value) for kv in fresh.all()] == [("a", 1), ("b", 20)]


def test_key_value_import_applies_put_rules() -> None:
    s = Stores.in_memory_key_value_store("kv")
    assert s.import_records([("a", 1), ("b", 2), ("a", None)]) == 3  # None deletes, as put does
    assert s.export_records() == [("b", 2)]


@PROPERTY
@given(st.lists(st.tuples(keys, values), max_size=40))
def test_key_value_round_trip(ops: list[tuple[str, int | None]]) -> None:
    s = Stores.in_memory_key_value_store("kv")
    for k, v in ops:
        s.put(k, v)
    fresh = Stores.in_memory_key_value_store("kv")
    fresh.import_records(s.export_records())
    assert [(kv.key, kv.value) for kv in fresh.all()] == [(kv.key, kv.value) for kv in s.all()]
    assert fresh.export_records() == s.export_records()


# -- window ------------------------------------------------------------------------------------

def test_window_export_with_duplicates_keeps_every_value_in_insertion_order() -> None:
    s = Stores.in_memory_window_store("w", retention=100, window_size=10, grace=50, retain_duplicates=True)
    for k, v, start in [("b", 1, 10), ("a", 2, 10), ("b", 3, 10), ("a", 4, 0), ("b", 1, 10)]:
        assert s.put(k, v, start)
    assert s.export_records() == [("a", 4, 0), ("a", 2, 10), ("b", 1, 10), ("b", 3, 10), ("b", 1, 10)]
    fresh = Stores.in_memory_window_store("w", retention=100, window_size=10, grace=50, retain_duplicates=True)
    assert fresh.import_records(s.export_records()) == 5
    assert window_rows(fresh) == window_rows(s) and len(fresh) == 5
    assert list(fresh.fetch("b", 10, 10)) == list(s.fetch("b", 10, 10))  # duplicates, in order
    assert fresh.observed_stream_time == s.observed_stream_time == 10


def test_window_import_drops_late_windows_like_put() -> None:
    s = Stores.in_memory_window_store("w", retention=100, window_size=10, grace=5)
    assert s.import_records([("a", 1, 50), ("a", 2, 40), ("b", 3, 46)]) == 3
    assert s.export_records() == [("b", 3, 46), ("a", 1, 50)]  # 40 <= 50 - 5: dropped
    assert s.dropped_records == 1


@PROPERTY
@given(retention=st.integers(10, 80), grace=st.integers(1, 10), dups=st.booleans(),
       ops=st.lists(st.tuples(keys, st.one_of(st.none(), present_values), times), max_size=60))
def test_window_round_trip(retention: int, grace: int, dups: bool, ops: list) -> None:
    def make() -> Any:
        return Stores.in_memory_window_store("w", retention=retention, window_size=5, grace=grace,
                                             retain_duplicates=dups)

    s = make()
    for k, v, start in ops:
        s.put(k, v, start)
    exported = s.export_records()
    assert [(k, start, v) for k, v, start in exported] == window_rows(s)
    fresh = make()
    assert fresh.import_records(exported) == len(exported)
    assert window_rows(fresh) == window_rows(s)
    assert fresh.export_records() == exported
    assert fresh.dropped_records == 0
    if exported and max(start for _, _, start in exported) == s.observed_stream_time:
        assert fresh.observed_stream_time == s.observed_stream_time
    else:  # the newest window was deleted: its time is not in the contents
        assert fresh.observed_stream_time <= s.observed_stream_time


# -- session -----------------------------------------------------------------------------------

def test_session_export_is_put_arguments_by_end_key_start() -> None:
    s = Stores.in_memory_session_store("s", 1000)
    for k, start, end, agg in [("b", 0, 5, 1), ("a", 3, 5, 2), ("a", 0, 2, 3), ("b", 7, 9, 4)]:
        s.put(Windowed(k, start, end), agg)
    assert s.export_records() == [(Windowed("a", 0, 2), 3), (Windowed("a", 3, 5), 2),
                                  (Windowed("b", 0, 5), 1), (Windowed("b", 7, 9), 4)]
    fresh = Stores.in_memory_session_store("s", 1000)
    assert fresh.import_records(s.export_records()) == 4
    assert session_rows(fresh) == session_rows(s)
    assert fresh.observed_stream_time == 9


@PROPERTY
@given(retention=st.integers(0, 60),
       ops=st.lists(st.tuples(keys, times, lengths, st.one_of(st.none(), present_values)), max_size=60))
def test_session_round_trip(retention: int, ops: list) -> None:
    s = Stores.in_memory_session_store("s", retention)
    for k, start, length, agg in ops:
        s.put(Windowed(k, start, start + length), agg)
    exported = s.export_records()
    assert [(w.key, w.start, w.end, agg) for w, agg in exported] == session_rows(s)
    fresh = Stores.in_memory_session_store("s", retention)
    assert fresh.import_records(exported) == len(exported)
    assert session_rows(fresh) == session_rows(s)
    assert fresh.export_records() == exported
    if exported and max(w.end for w, _ in exported) == s.observed_stream_time:
        assert fresh.observed_stream_time == s.observed_stream_time
    else:
        assert fresh.observed_stream_time <= s.observed_stream_time


# -- versioned ---------------------------------------------------------------------------------

def test_versioned_export_has_the_whole_history_by_timestamp() -> None:
    s = Stores.in_memory_versioned_store("v", history_retention=100)
    s.put("k", "a", 10)
    s.put("k", "b", 20)
    s.put("j", "x", 15)
    s.put("k", "c", 15)        # an older version, inserted into the history
    s.put("j", None, 30)       # a tombstone is a version too
    assert s.export_records() == [("k", "a", 10), ("k", "c", 15), ("j", "x", 15), ("k", "b", 20),
                                  ("j", None, 30)]
    fresh = Stores.in_memory_versioned_store("v", history_retention=100)
    assert fresh.import_records(s.export_records()) == 5
    assert all_versions(fresh) == all_versions(s)
    assert fresh.get("k", 17) == s.get("k", 17) == ("c", 15, 20)
    assert fresh.get("j") is None and fresh.get("j", 20) == ("x", 15, 30)
    assert fresh.observed_stream_time == s.observed_stream_time == 30


def test_versioned_import_drops_versions_older_than_history() -> None:
    s = Stores.in_memory_versioned_store("v", history_retention=10)
    assert s.import_records([("k", 1, 100), ("k", 2, 80)]) == 2  # 80 < 100 - 10: not put
    assert s.export_records() == [("k", 1, 100)] and s.dropped_records == 1


@PROPERTY
@given(history=st.integers(0, 60), interval=st.one_of(st.none(), st.integers(1, 30)),
       ops=st.lists(st.tuples(keys, values, times), max_size=60))
def test_versioned_round_trip(history: int, interval: int | None, ops: list) -> None:
    s = Stores.in_memory_versioned_store("v", history_retention=history, segment_interval=interval)
    for k, v, ts in ops:
        s.put(k, v, ts)
    exported = s.export_records()
    assert [ts for _, _, ts in exported] == sorted(ts for _, _, ts in exported)
    assert len(exported) == len(s)
    fresh = Stores.in_memory_versioned_store("v", history_retention=history, segment_interval=interval)
    assert fresh.import_records(exported) == len(exported)
    assert fresh.dropped_records == 0
    assert fresh.observed_stream_time == s.observed_stream_time
    for k in set(s.keys()) | set(fresh.keys()):
        assert fresh.get(k) == s.get(k)
        for as_of in range(max(0, s.observed_stream_time - history), s.observed_stream_time + 2):
            assert fresh.get(k, as_of) == s.get(k, as_of), (k, as_of)


# -- the change-logging wrappers restore through import_records ---------------------------------

class Recording:
    """Wraps a store and records the import_records calls (the wrapper must restore through it)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.imported: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def import_records(self, records: Any) -> int:
        rows = list(records)
        self.imported.extend(rows)
        return self.store.import_records(rows)


@pytest.mark.parametrize("kind", ["key_value", "window", "window_dups", "session", "versioned"])
def test_restore_decodes_changelog_records_into_import_records(kind: str) -> None:
    def make() -> Any:
        if kind == "key_value":
            return Stores.in_memory_key_value_store("s")
        if kind.startswith("window"):
            return Stores.in_memory_window_store("s", 100, 10, 50, retain_duplicates=kind == "window_dups")
        if kind == "session":
            return Stores.in_memory_session_store("s", 100)
        return Stores.in_memory_versioned_store("s", 100)

    live = change_logged(make(), serde.STRING, serde.INT)
    if kind == "key_value":
        live.put("a", 1)
        live.put("b", 2)
    elif kind.startswith("window"):
        live.put("a", 1, 10)
        live.put("a", 2, 10)
    elif kind == "session":
        live.put(Windowed("a", 0, 5), 1)
        live.put(Windowed("b", 3, 8), 2)
    else:
        live.put("a", 1, 10)
        live.put("a", 2, 20)
    inner = Recording(make())
    restored = change_logged(inner, serde.STRING, serde.INT)  # type: ignore[arg-type]
    records = live.drain()
    assert restored.restore(records) == len(records)
    assert inner.imported == live.inner.export_records()  # in this order, the live store's own export
    assert inner.store.export_records() == live.inner.export_records()
