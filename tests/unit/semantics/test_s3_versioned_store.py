"""docs/semantics.md, "Versioned store": the in-memory versioned key-value store (KIP-889), against ``VersionedModel``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.stores import NOT_PUT, VALID_TO_UNDEFINED, Stores, VersionedRecord

from ._util import seqs
from .models import VersionedModel


def _t(r: Any) -> tuple | None:
    """A VersionedRecord as ``(value, timestamp, valid_to)``."""
    if r is None:
        return None
    assert isinstance(r, VersionedRecord)
    return (r.value, r.timestamp, r.valid_to)


def test_constants() -> None:
    assert NOT_PUT == -(2**63)
    assert VALID_TO_UNDEFINED == -1


def test_the_vector() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    assert s.put("k", "a", 10) == -1
    assert s.put("k", "b", 20) == -1
    assert s.put("k", "c", 15) == 20
    assert _t(s.get("k")) == ("b", 20, None)
    assert s.get("k", 9) is None
    assert _t(s.get("k", 14)) == ("a", 10, 15)
    assert _t(s.get("k", 17)) == ("c", 15, 20)
    assert _t(s.get("k", 25)) == ("b", 20, None)
    assert s.put("k", None, 30) == -1
    assert s.get("k") is None
    assert _t(s.get("k", 25)) == ("b", 20, 30)
    assert s.get("k", 35) is None


def test_versioned_record_fields() -> None:
    r = VersionedRecord("v", 5)
    assert (r.value, r.timestamp, r.valid_to) == ("v", 5, None)


def test_put_outside_history_retention_returns_not_put() -> None:
    """``timestamp < observed - history_retention`` -> NOT_PUT, nothing stored; the boundary is kept."""
    s = Stores.in_memory_versioned_store("v", 100)
    s.put("x", 1, 1000)
    assert s.put("k", "late", 899) == NOT_PUT
    assert s.get("k") is None and s.get("k", 950) is None
    assert s.put("k", "edge", 900) == VALID_TO_UNDEFINED  # 900 == 1000 - 100 is inside
    assert _t(s.get("k", 950)) == ("edge", 900, None)


def test_same_timestamp_replaces() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    s.put("k", "a", 10)
    s.put("k", "b", 20)
    assert s.put("k", "a2", 10) == 20
    assert _t(s.get("k", 10)) == ("a2", 10, 20)
    assert s.put("k", None, 10) == 20
    assert s.get("k", 15) is None
    assert _t(s.get("k", 20)) == ("b", 20, None)


def test_tombstone_is_always_a_version() -> None:
    """[deliberate]: a tombstone with the latest timestamp on a key without versions is recorded."""
    s = Stores.in_memory_versioned_store("v", 100)
    assert s.put("k", None, 30) == VALID_TO_UNDEFINED
    assert s.get("k") is None
    assert s.put("k", "a", 20) == 30  # valid_to is the tombstone's timestamp
    assert _t(s.get("k", 25)) == ("a", 20, 30)
    assert s.get("k", 30) is None
    assert s.get("k") is None


def test_get_as_of_outside_history() -> None:
    """``as_of < observed - history``: the newest version only if its timestamp <= as_of."""
    s = Stores.in_memory_versioned_store("v", 100)
    s.put("k", "a", 10)
    s.put("k", "b", 40)
    s.put("x", 1, 200)  # observed 200: as_of < 100 is outside history
    assert _t(s.get("k", 99)) == ("b", 40, None)
    assert _t(s.get("k", 40)) == ("b", 40, None)
    assert s.get("k", 39) is None  # would be "a" inside history, but it is outside
    assert s.get("k", 15) is None
    assert _t(s.get("k", 100)) == ("b", 40, None)  # 100 == 200 - 100: inside history
    assert s.put("k", None, 50) == NOT_PUT  # 50 < 200 - 100
    assert _t(s.get("k", 99)) == ("b", 40, None)
    t = Stores.in_memory_versioned_store("t", 100)
    t.put("k", "a", 10)
    t.put("k", None, 40)
    t.put("x", 1, 200)
    assert t.get("k", 99) is None  # the newest version (40 <= 99) is a tombstone


def test_delete() -> None:
    s = Stores.in_memory_versioned_store("v", 100)
    s.put("k", "a", 10)
    s.put("k", "b", 20)
    assert _t(s.delete("k", 15)) == ("a", 10, 20)
    assert s.get("k", 16) is None
    assert _t(s.get("k", 20)) == ("b", 20, None)
    assert s.delete("k", 15) is None  # already a tombstone there
    assert _t(s.delete("k", 25)) == ("b", 20, None)
    assert s.get("k") is None
    s.put("x", 1, 1000)
    assert s.delete("k", 899) is None  # outside history retention: no change
    assert s.put("k", "c", 900) == VALID_TO_UNDEFINED


def test_validation_and_timedelta() -> None:
    with pytest.raises(ValueError, match="history_retention"):
        Stores.in_memory_versioned_store("v", -1)
    with pytest.raises(ValueError):
        Stores.in_memory_versioned_store("", 10)
    with pytest.raises(ValueError, match="segment_interval"):
        Stores.in_memory_versioned_store("v", 10, segment_interval=-1)
    s = Stores.in_memory_versioned_store("v", timedelta(milliseconds=100))
    s.put("x", 1, 1000)
    assert s.put("k", 1, 899) == NOT_PUT
    assert s.put("k", 1, 900) == VALID_TO_UNDEFINED
    store = Stores.in_memory_versioned_store("rates", 10)
    with pytest.raises((ValueError, TypeError), match="rates"):
        store.put(None, 1, 0)
    with pytest.raises(TypeError, match="rates"):
        store.put("k", 1, "5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rates"):
        store.get("k", 1.5)  # type: ignore[arg-type]


# -- property test --------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])
TS = st.integers(0, 200)
OPS = st.one_of(
    st.tuples(st.just("put"), KEYS, st.integers(0, 9) | st.none(), TS),
    st.tuples(st.just("put"), KEYS, st.integers(0, 9), TS),
    st.tuples(st.just("get"), KEYS, st.none() | TS),
    st.tuples(st.just("delete"), KEYS, TS),
)


@given(st.integers(0, 80), st.none() | st.integers(1, 50), seqs(OPS, 40, 100), st.sampled_from([0, 1_700_000_000_000]))
def test_versioned_store_matches_model(history: int, segment: int | None, ops: list[tuple], base: int) -> None:
    """``base``: the same operations at realistic epoch-millisecond timestamps."""
    ops = [op[:-1] + (None if op[-1] is None else base + op[-1],) for op in ops]
    store = Stores.in_memory_versioned_store("v", history, segment_interval=segment)
    model = VersionedModel(history)
    for op in ops:
        name, args = op[0], op[1:]
        if name == "put":
            assert store.put(*args) == model.put(*args), op
        elif name == "get":
            key, as_of = args
            got = store.get(key) if as_of is None else store.get(key, as_of)
            assert _t(got) == model.get(key, as_of), op
        else:
            assert _t(store.delete(*args)) == model.delete(*args), op
    # every readable version, at every point in (and around) history
    for key in ["a", "b", "c"]:
        for as_of in range(base - 1, base + 202):
            assert _t(store.get(key, as_of)) == model.get(key, as_of), (key, as_of)


def test_argument_names_of_semantics_md() -> None:
    s = Stores.in_memory_versioned_store(name="v", history_retention=100, segment_interval=10)
    assert s.put(key="k", value="a", timestamp=10) == VALID_TO_UNDEFINED
    assert _t(s.get(key="k", as_of=10)) == ("a", 10, None)
    assert _t(s.delete(key="k", timestamp=20)) == ("a", 10, None)
    assert s.get(key="k") is None
