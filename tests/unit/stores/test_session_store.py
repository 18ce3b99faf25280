"""Session store (KIP-94): docs/semantics.md, "Session store", against the reference model."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.records import KeyValue, Windowed
from streamproc.stores import SessionStore, Stores

from .hypothesis_settings import PROPERTY
from .reference_models import RefSession
from .strategies import bound_keys, keys


def test_kip_example_find_sessions() -> None:
    s = Stores.in_memory_session_store("s", 10_000)
    for start, end in [(0, 99), (101, 200), (201, 300), (301, 400)]:
        s.put(Windowed("k", start, end), f"{start}-{end}")
    assert list(s.find_sessions("k", 150, 300)) == [
        KeyValue(Windowed("k", 101, 200), "101-200"),
        KeyValue(Windowed("k", 201, 300), "201-300"),
    ]


def test_strict_expiry() -> None:
    s = Stores.in_memory_session_store("s", 100)
    assert s.put(Windowed("k", 0, 10), 1)
    assert s.put(Windowed("k", 200, 210), 2)  # observed 210: end 10 < 110 expired
    assert s.fetch_session("k", 0, 10) is None
    assert s.put(Windowed("x", 100, 110), 3) is True  # 110 < 110 is false: kept
    assert s.put(Windowed("x", 100, 109), 4) is False
    assert s.dropped_records == 1
    assert [kv.key for kv in s.all()] == [Windowed("x", 100, 110), Windowed("k", 200, 210)]


def test_put_none_and_remove() -> None:
    s = Stores.in_memory_session_store("s", 100)
    s.put(Windowed("k", 0, 10), 1)
    s.put(Windowed("k", 20, 30), 2)
    s.put(Windowed("k", 0, 10), None)
    s.remove(Windowed("k", 20, 30))
    assert list(s.fetch("k")) == [] and len(s) == 0


def test_orders() -> None:
    s = Stores.in_memory_session_store("s", 1000)
    for key, start, end in [("b", 5, 10), ("a", 8, 10), ("a", 1, 20), ("c", 0, 5), ("a", 3, 10)]:
        s.put(Windowed(key, start, end), key)
    assert [tuple(kv.key) for kv in s.fetch("a")] == [("a", 3, 10), ("a", 8, 10), ("a", 1, 20)]
    assert [tuple(kv.key) for kv in s.fetch_keys("a", "b")] == [
        ("a", 3, 10), ("a", 8, 10), ("b", 5, 10), ("a", 1, 20)]
    assert [tuple(kv.key) for kv in s.all()] == [
        ("c", 0, 5), ("a", 3, 10), ("a", 8, 10), ("b", 5, 10), ("a", 1, 20)]
    assert [tuple(kv.key) for kv in s.find_sessions("a", 10, 5)] == [("a", 3, 10), ("a", 1, 20)]


def test_fetch_keys_inverted_warns(caplog: pytest.LogCaptureFixture) -> None:
    s = Stores.in_memory_session_store("s", 1000)
    s.put(Windowed("a", 1, 1), 1)
    with caplog.at_level(logging.WARNING, logger="streamproc.stores"):
        assert list(s.fetch_keys("z", "a")) == []
    assert "key_from" in caplog.text


def test_snapshot() -> None:
    s = Stores.in_memory_session_store("s", 10)
    s.put(Windowed("k", 0, 5), 1)
    it = s.find_sessions("k", 0, 100)
    s.remove(Windowed("k", 0, 5))
    s.put(Windowed("k", 90, 100), 2)
    assert list(it) == [KeyValue(Windowed("k", 0, 5), 1)]


def test_tuple_and_int_keys() -> None:
    s = Stores.in_memory_session_store("s", 1000)
    s.put(Windowed(("u", 1), 0, 0), 1)
    s.put(Windowed(("u", 2), 0, 0), 2)
    s.put(Windowed(("u",), 0, 0), 3)
    assert list(s.fetch(("u", 1))) == [KeyValue(Windowed(("u", 1), 0, 0), 1)]
    assert [kv.value for kv in s.fetch_keys(("u", 1), ("u", 2))] == [1, 2]


# -- property ------------------------------------------------------------------------------------
sess_time = st.integers(0, 150)
sess_len = st.integers(0, 30)
session_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, sess_time, sess_len, st.one_of(st.none(), st.integers(0, 9))),
        st.tuples(st.just("put"), keys, sess_time, sess_len, st.integers(0, 9)),
        st.tuples(st.just("put"), keys, sess_time, sess_len, st.integers(0, 9)),
        st.tuples(st.just("remove"), keys, sess_time, sess_len),
        st.tuples(st.just("find"), keys, st.integers(-5, 190), st.integers(-5, 190)),
        st.tuples(st.just("fetch_session"), keys, sess_time, sess_len),
        st.tuples(st.just("fetch"), keys, st.booleans()),
        st.tuples(st.just("fetch_keys"), bound_keys, bound_keys, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
    ),
    max_size=60,
)


def as_rows(items: list) -> list:
    return [((kv.key.key, kv.key.start, kv.key.end), kv.value) for kv in items]


def model_rows(rows: list) -> list:
    return [((k, start, end), agg) for (k, start, end), agg in rows]


def run_session_op(store: SessionStore, model: RefSession, op: tuple) -> None:
    name = op[0]
    if name == "put":
        _, k, start, length, agg = op
        assert store.put(Windowed(k, start, start + length), agg) == model.put(k, start, start + length, agg)
    elif name == "remove":
        _, k, start, length = op
        assert store.remove(Windowed(k, start, start + length)) == model.remove(k, start, start + length)
    elif name == "find":
        _, k, ee, ls = op
        assert as_rows(list(store.find_sessions(k, ee, ls))) == model_rows(model.find_sessions(k, ee, ls)), op
    elif name == "fetch_session":
        _, k, start, length = op
        assert store.fetch_session(k, start, start + length) == model.fetch_session(k, start, start + length)
    elif name == "fetch":
        want = model_rows(model.find_sessions(op[1], -(10**9), 10**9))
        assert as_rows(list(store.fetch(op[1], backward=op[2]))) == (want[::-1] if op[2] else want)
    elif name == "fetch_keys":
        want = model_rows(model.fetch_keys(op[1], op[2]))
        assert as_rows(list(store.fetch_keys(op[1], op[2], op[3]))) == (want[::-1] if op[3] else want)
    else:
        want = model_rows(model.fetch_keys(None, None))
        assert as_rows(list(store.all(op[1]))) == (want[::-1] if op[1] else want)
    assert store.observed_stream_time == model.observed
    assert store.dropped_records == model.dropped


@PROPERTY
@given(st.integers(0, 80), session_ops)
def test_session_store_matches_reference_model(retention: int, ops: list) -> None:
    store = Stores.in_memory_session_store("s", retention)
    model = RefSession(retention)
    for op in ops:
        run_session_op(store, model, op)
    assert as_rows(list(store.all())) == model_rows(model.fetch_keys(None, None))
    assert len(store) == len(model.fetch_keys(None, None))


@PROPERTY
@given(st.integers(0, 80), session_ops, session_ops)
def test_session_iterators_are_snapshots(retention: int, before: list, after: list) -> None:
    store = Stores.in_memory_session_store("s", retention)
    model = RefSession(retention)
    for op in before:
        run_session_op(store, model, op)
    it = store.find_sessions("a", 10, 100)
    want = model_rows(model.find_sessions("a", 10, 100))
    for op in after:
        run_session_op(store, model, op)
    assert as_rows(list(it)) == want


def test_find_sessions_includes_the_longest_session_at_its_bound() -> None:
    s = Stores.in_memory_session_store("s", 1000)
    s.put(Windowed("k", 0, 10), "long")
    s.put(Windowed("k", 3, 4), "short")
    assert [kv.value for kv in s.find_sessions("k", 0, 0)] == ["long"]
    assert [kv.value for kv in s.find_sessions("k", 4, 3)] == ["short", "long"]
    assert list(s.find_sessions("k", 11, 100)) == []
