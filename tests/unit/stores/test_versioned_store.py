"""Versioned store (KIP-889): docs/semantics.md, "Versioned store", against the reference model."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.stores import NOT_PUT, VALID_TO_UNDEFINED, Stores, VersionedKeyValueStore, VersionedRecord
from streamproc.stores.versioned import default_segment_interval

from .hypothesis_settings import PROPERTY
from .reference_models import RefVersioned
from .strategies import keys


def test_semantics_vector() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    assert s.put("k", "a", 10) == -1
    assert s.put("k", "b", 20) == -1
    assert s.put("k", "c", 15) == 20
    assert s.get("k") == ("b", 20, None)
    assert s.get("k", 9) is None
    assert s.get("k", 14) == ("a", 10, 15)
    assert s.get("k", 17) == ("c", 15, 20)
    assert s.get("k", 25) == ("b", 20, None)
    assert s.put("k", None, 30) == -1
    assert s.get("k") is None
    assert s.get("k", 25) == ("b", 20, 30)
    assert s.get("k", 35) is None


def test_record_type_and_constants() -> None:
    r = VersionedRecord("x", 5)
    assert r == ("x", 5, None) and r.value == "x" and r.timestamp == 5 and r.valid_to is None
    assert NOT_PUT == -(2**63) and VALID_TO_UNDEFINED == -1


def test_not_put_outside_history_and_same_timestamp_replaces() -> None:
    s = Stores.in_memory_versioned_store("v", 10)
    s.put("k", "a", 100)
    assert s.put("k", "old", 89) == NOT_PUT
    assert s.dropped_records == 1
    assert s.put("k", "edge", 90) == 100
    assert s.put("k", "edge2", 90) == 100
    assert s.get("k", 95) == ("edge2", 90, 100)
    assert s.put("k", "a2", 100) == -1
    assert s.get("k") == ("a2", 100, None)


def test_get_older_than_history_returns_newest_only_if_old_enough() -> None:
    s = Stores.in_memory_versioned_store("v", 10)
    s.put("k", "a", 50)
    s.put("x", "y", 60)
    s.put("k", "b", 100)
    assert s.get("k", 89) is None  # outside history: newest (100) is newer than 89
    assert s.get("x", 89) == ("y", 60, None)  # outside history, newest <= as_of
    assert s.get("k", 90) == ("a", 50, 100)


def test_tombstone_is_always_recorded() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    assert s.put("k", None, 50) == -1  # no older version, latest timestamp: still recorded
    assert s.put("k", "a", 40) == 50
    assert s.get("k", 45) == ("a", 40, 50)
    assert s.get("k", 55) is None


def test_delete() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    s.put("k", "a", 10)
    s.put("k", "b", 20)
    assert s.delete("k", 15) == ("a", 10, 20)
    assert s.get("k", 16) is None and s.get("k", 12) == ("a", 10, 15)
    s.put("z", "late", 500)
    assert s.delete("k", 100) is None  # outside history: no change
    assert s.get("k") == ("b", 20, None)


@pytest.mark.parametrize(
    "history, expected",
    [(0, 2000), (30_000, 10_000), (60_000, 20_000), (90_000, 20_000), (300_000, 60_000),
     (600_000, 60_000), (3_600_000, 300_000), (7_200_000, 300_000), (86_400_000, 3_600_000)],
)
def test_default_segment_interval(history: int, expected: int) -> None:
    assert default_segment_interval(history) == expected
    assert Stores.in_memory_versioned_store("v", history).segment_interval == expected


def test_explicit_segment_interval_must_be_positive() -> None:
    assert Stores.in_memory_versioned_store("v", timedelta(minutes=1), timedelta(seconds=5)).segment_interval == 5000
    with pytest.raises(ValueError, match="segment_interval of versioned store 'v'"):
        Stores.in_memory_versioned_store("v", 100, 0)


def test_whole_segments_expire() -> None:
    s = Stores.in_memory_versioned_store("v", history_retention=100, segment_interval=10)
    for ts in range(50):
        s.put("k", ts, ts)
    assert len(s) == 50
    s.put("other", "x", 205)  # observed 205: versions with valid_to <= 105 are out of retention
    assert len(s) == 2  # every older version of "k" ended by 49; only the latest of each key stays
    assert s.get("k") == (49, 49, None)
    s.put("k", None, 210)
    s.put("z", 1, 400)
    assert "k" not in s.keys()  # a key left with only an expired tombstone is dropped


# -- property ---------------------------------------------------------------------------------
vtime = st.integers(0, 200)
versioned_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, st.one_of(st.none(), st.integers(0, 9)), vtime),
        st.tuples(st.just("put"), keys, st.integers(0, 9), vtime),
        st.tuples(st.just("delete"), keys, vtime),
        st.tuples(st.just("get"), keys, st.one_of(st.none(), st.integers(-5, 210))),
    ),
    max_size=80,
)


def run_versioned_op(store: VersionedKeyValueStore, model: RefVersioned, op: tuple) -> None:
    name = op[0]
    if name == "put":
        assert store.put(op[1], op[2], op[3]) == model.put(op[1], op[2], op[3]), op
    elif name == "delete":
        assert store.delete(op[1], op[2]) == model.delete(op[1], op[2]), op
    else:
        assert store.get(op[1], op[2]) == model.get(op[1], op[2]), op
    assert store.observed_stream_time == model.observed
    assert store.dropped_records == model.dropped


def assert_same_gets(store: VersionedKeyValueStore, model: RefVersioned) -> None:
    for key in ["a", "b", "c", "d", "e"]:
        assert store.get(key) == model.get(key)
        for as_of in range(-2, 215):
            assert store.get(key, as_of) == model.get(key, as_of), (key, as_of)


@PROPERTY
@given(st.integers(0, 60), st.one_of(st.none(), st.integers(1, 40)), versioned_ops)
def test_versioned_store_matches_reference_model(history: int, interval: int | None, ops: list) -> None:
    store = Stores.in_memory_versioned_store("v", history, interval)
    model = RefVersioned(history)
    for op in ops:
        run_versioned_op(store, model, op)
    assert_same_gets(store, model)
