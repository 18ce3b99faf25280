"""Key-value store against the reference model."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.stores import KeyValueStore, Stores

from .hypothesis_settings import PROPERTY
from .reference_models import RefKeyValue
from .strategies import bound_keys, keys, values


def test_basic_operations() -> None:
    s = Stores.in_memory_key_value_store("kv")
    assert s.kind == "key_value" and s.observed_stream_time == -1 and s.dropped_records == 0
    s.put("b", 2)
    s.put("a", 1)
    assert s.put_if_absent("a", 9) == 1
    assert s.put_if_absent("c", 3) is None
    assert s.get("c") == 3
    assert s.delete("b") == 2 and s.delete("b") is None
    assert list(s.all()) == [("a", 1), ("c", 3)]
    assert list(s.range("b", None)) == [("c", 3)]
    assert list(s.all(backward=True)) == [("c", 3), ("a", 1)]
    s.put("a", None)
    assert s.count() == len(s) == s.approximate_num_entries == 1


def test_inverted_range_is_empty_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    s = Stores.in_memory_key_value_store("kv")
    s.put("a", 1)
    with caplog.at_level(logging.WARNING, logger="streamproc.stores"):
        assert list(s.range("z", "a")) == []
    assert "'kv'" in caplog.text


def test_range_snapshot() -> None:
    s = Stores.in_memory_key_value_store("kv")
    s.put("a", 1)
    it = s.all()
    s.put("b", 2)
    s.delete("a")
    assert list(it) == [("a", 1)]


kv_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, values),
        st.tuples(st.just("put_if_absent"), keys, values),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("range"), bound_keys, bound_keys, st.booleans()),
    ),
    max_size=50,
)


def run_kv_op(store: KeyValueStore, model: RefKeyValue, op: tuple) -> None:
    name = op[0]
    if name == "range":
        assert list(store.range(op[1], op[2], op[3])) == model.range(op[1], op[2], op[3])
    else:
        assert getattr(store, name)(*op[1:]) == getattr(model, name)(*op[1:]), op


@PROPERTY
@given(kv_ops)
def test_key_value_store_matches_reference_model(ops: list) -> None:
    store = Stores.in_memory_key_value_store("kv")
    model = RefKeyValue()
    for op in ops:
        run_kv_op(store, model, op)
    assert list(store.all()) == model.range(None, None)
