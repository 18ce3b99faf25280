"""Window store (KIP-428): docs/semantics.md, "Window store", against the reference model."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.records import KeyValue, Windowed
from streamproc.stores import Stores, WindowStore
from streamproc.stores.window import SMALL_SEGMENT

from .hypothesis_settings import PROPERTY
from .reference_models import RefWindow
from .strategies import bound_keys, bound_times, keys, present_values, times, values


# -- validation: order and exact messages -------------------------------------------------------
def test_window_size_larger_than_retention_message() -> None:
    with pytest.raises(ValueError) as err:
        Stores.in_memory_window_store("w1", retention=10, window_size=20)
    assert str(err.value) == ("The retention period of the window store w1 must be no smaller than its "
                              "window size. Got size=[20], retention=[10]")


def test_grace_larger_than_retention_message() -> None:
    with pytest.raises(ValueError) as err:
        Stores.in_memory_window_store("w2", retention=10, window_size=5, grace=11)
    assert str(err.value) == ("The grace period of the window store w2 must not exceed its retention "
                              "period. Got grace period=[11], retention=[10]")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("", -1, -1, -1), "name"),
        ((None, 10, 5, 5), "name"),
        (("w", -1, -1, -1), "retention"),
        (("w", 10, -1, -1), "window_size"),
        (("w", 10, 5, -1), "grace"),
        (("w", 10, 20, 30), "window size"),
        (("w", 10, 5, 30), "grace period"),
    ],
)
def test_validation_order(args: tuple, fragment: str) -> None:
    name, retention, size, grace = args
    with pytest.raises(ValueError) as err:
        Stores.in_memory_window_store(name, retention, size, grace)
    assert fragment in str(err.value)
    if name:
        assert name in str(err.value)


def test_negative_duration_names_store_and_value() -> None:
    with pytest.raises(ValueError, match=r"retention of window store 'clicks' must not be negative, got -5"):
        Stores.in_memory_window_store("clicks", -5, 1)


def test_timedelta_durations_and_grace_default() -> None:
    s = Stores.in_memory_window_store("w", timedelta(seconds=1), timedelta(milliseconds=100))
    assert (s.retention, s.window_size, s.grace) == (1000, 100, 1000)
    assert s.kind == "window" and s.name == "w" and s.observed_stream_time == -1


# -- rules -------------------------------------------------------------------------------------
def test_expiry_and_grace() -> None:
    s = Stores.in_memory_window_store("w", retention=100, window_size=10, grace=50)
    assert s.put("a", 1, 0) is True
    assert s.put("a", 2, 100) is True  # observed 100: start 0 <= 100 - 100 is expired
    assert s.get("a", 0) is None
    assert s.approximate_num_entries == 1
    assert s.put("b", 3, 50) is False  # 50 <= 100 - 50: late
    assert s.put("b", 4, 51) is True
    assert s.dropped_records == 1
    assert list(s.fetch_all(None, None)) == [KeyValue(Windowed("b", 51, 61), 4), KeyValue(Windowed("a", 100, 110), 2)]


def test_fetch_lower_bound_is_observed_minus_retention_plus_one() -> None:
    s = Stores.in_memory_window_store("w", retention=10, window_size=1)
    for start in range(21):
        s.put("k", start, start)
    assert [kv.key for kv in s.fetch("k", 0, 100)] == list(range(11, 21))
    assert [kv.key for kv in s.fetch("k", 15, 17, backward=True)] == [17, 16, 15]


def test_put_none_deletes_and_is_noop_with_duplicates() -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    s.put("k", 1, 5)
    s.put("k", None, 5)
    assert s.get("k", 5) is None and len(s) == 0
    d = Stores.in_memory_window_store("d", 100, 10, retain_duplicates=True)
    d.put("k", 1, 5)
    d.put("k", 2, 5)
    d.put("k", None, 5)
    assert list(d.fetch("k", 0, 10)) == [(5, 1), (5, 2)]
    assert list(d.fetch("k", 0, 10, backward=True)) == [(5, 2), (5, 1)]
    assert d.get("k", 5) == 2


def test_key_from_greater_than_key_to_is_empty_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    s.put("a", 1, 1)
    s.put("z", 1, 1)
    with caplog.at_level(logging.WARNING, logger="streamproc.stores"):
        assert list(s.fetch_keys("z", "a", 0, 10)) == []
    assert "key_from" in caplog.text and "'w'" in caplog.text


def test_open_bounds() -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    for k, start in [("b", 3), ("a", 3), ("c", 1)]:
        s.put(k, k + str(start), start)
    assert [kv.key for kv in s.fetch_keys(None, "b", None, None)] == [Windowed("a", 3, 13), Windowed("b", 3, 13)]
    assert [kv.key for kv in s.fetch_keys("b", None, 2, None)] == [Windowed("b", 3, 13)]
    assert [kv.key.key for kv in s.all(backward=True)] == ["b", "a", "c"]


def test_large_segment_is_promoted_and_still_ordered() -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    n = SMALL_SEGMENT * 3
    for i in reversed(range(n)):
        s.put(i, i * 10, 7)
    assert [kv.key.key for kv in s.fetch_keys(5, 40, 7, 7)] == list(range(5, 41))
    assert len(s) == n


def test_snapshot_iterator_is_not_affected_by_later_writes_and_expiry() -> None:
    s = Stores.in_memory_window_store("w", retention=10, window_size=1)
    s.put("k", "a", 1)
    s.put("k", "b", 2)
    it = s.fetch("k", 0, 100)
    everything = s.all()
    s.put("k", "c", 3)
    s.put("k", None, 2)
    s.put("x", "y", 50)  # expires every start <= 40
    assert list(it) == [(1, "a"), (2, "b")]
    assert [kv.value for kv in everything] == ["a", "b"]
    assert list(s.fetch("k", 0, 100)) == []


def test_iterator_close_and_context_manager() -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    s.put("k", 1, 1)
    s.put("k", 2, 2)
    with s.fetch("k", 0, 10) as it:
        assert it.peek_next_key() == 1
        assert next(it) == (1, 1)
    assert list(it) == []


# -- property: the store equals the reference model -------------------------------------------
window_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, values, times),
        st.tuples(st.just("put"), keys, present_values, times),
        st.tuples(st.just("get"), keys, times),
        st.tuples(st.just("fetch"), keys, bound_times, bound_times, st.booleans()),
        st.tuples(st.just("fetch_keys"), bound_keys, bound_keys, bound_times, bound_times, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
    ),
    max_size=60,
)


@st.composite
def window_params(draw: st.DrawFn) -> tuple[int, int, int | None, bool]:
    retention = draw(st.integers(0, 80))
    size = draw(st.integers(0, retention))
    grace = draw(st.one_of(st.none(), st.integers(0, retention)))
    return retention, size, grace, draw(st.booleans())


def run_window_op(store: WindowStore, model: RefWindow, op: tuple) -> None:
    name = op[0]
    if name == "put":
        assert store.put(op[1], op[2], op[3]) == model.put(op[1], op[2], op[3]), op
    elif name == "get":
        assert store.get(op[1], op[2]) == model.get(op[1], op[2]), op
    elif name == "fetch":
        assert list(store.fetch(op[1], op[2], op[3], op[4])) == model.fetch(*op[1:]), op
    elif name == "fetch_keys":
        assert list(store.fetch_keys(*op[1:])) == model.fetch_keys(*op[1:]), op
    else:
        assert list(store.all(op[1])) == model.fetch_keys(None, None, None, None, op[1]), op
    assert store.observed_stream_time == model.observed
    assert store.dropped_records == model.dropped


@PROPERTY
@given(window_params(), window_ops)
def test_window_store_matches_reference_model(params: tuple, ops: list) -> None:
    retention, size, grace, dups = params
    store = Stores.in_memory_window_store("w", retention, size, grace, dups)
    model = RefWindow(retention, size, retention if grace is None else grace, dups)
    for op in ops:
        run_window_op(store, model, op)
    assert list(store.all()) == model.fetch_keys(None, None, None, None)
    assert store.approximate_num_entries == model.count()


@PROPERTY
@given(window_params(), window_ops, window_ops)
def test_window_iterators_are_snapshots(params: tuple, before: list, after: list) -> None:
    retention, size, grace, dups = params
    store = Stores.in_memory_window_store("w", retention, size, grace, dups)
    model = RefWindow(retention, size, retention if grace is None else grace, dups)
    for op in before:
        run_window_op(store, model, op)
    it_all = store.all()
    it_a = store.fetch("a", None, None, backward=True)
    want_all = model.fetch_keys(None, None, None, None)
    want_a = model.fetch("a", None, None, True)
    for op in after:
        run_window_op(store, model, op)
    assert list(it_all) == want_all
    assert list(it_a) == want_a


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60), present_values), max_size=200))
def test_many_keys_per_segment_match_model(puts: list) -> None:
    store = Stores.in_memory_window_store("w", 50, 5)
    model = RefWindow(50, 5, 50, False)
    for key, start, value in puts:
        assert store.put(key, value, start) == model.put(key, value, start)
    assert list(store.all()) == model.fetch_keys(None, None, None, None)
    assert list(store.fetch_keys(20, 120, None, None, True)) == model.fetch_keys(20, 120, None, None, True)
