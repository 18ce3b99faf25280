"""The versioned store against its previous layout (``LegacyVersionedStore``), on random operation
sequences with segment expiry: every result, ``versions``, ``keys``, the size, ``observed_stream_time``
and ``dropped_records`` must agree after every step. The newest version is now returned as the
stored (immutable) record itself, so a later put must not change a record returned earlier."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamproc.stores import Stores, VersionedRecord

from .hypothesis_settings import PROPERTY
from .legacy_versioned_store import LegacyVersionedStore
from .strategies import keys

stamps = st.integers(0, 200)
versioned_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, st.one_of(st.none(), st.integers(0, 9)), stamps),
        st.tuples(st.just("put"), keys, st.integers(0, 9), stamps),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("get_as_of"), keys, st.integers(-5, 210)),
        st.tuples(st.just("delete"), keys, stamps),
        st.tuples(st.just("versions"), keys),
    ),
    max_size=80,
)


@PROPERTY
@given(st.integers(0, 100), st.one_of(st.none(), st.integers(1, 40)), versioned_ops)
def test_versioned_store_matches_the_previous_layout(history: int, interval: int | None, ops: list) -> None:
    store = Stores.in_memory_versioned_store("v", history, interval)
    legacy = LegacyVersionedStore("v", history, interval)
    returned: list[tuple[VersionedRecord, tuple]] = []
    for op in ops:
        name = op[0]
        if name == "put":
            assert store.put(op[1], op[2], op[3]) == legacy.put(op[1], op[2], op[3]), op
        elif name == "get":
            got = store.get(op[1])
            assert got == legacy.get(op[1]), op
            if got is not None:
                returned.append((got, tuple(got)))
        elif name == "get_as_of":
            assert store.get(op[1], op[2]) == legacy.get(op[1], op[2]), op
        elif name == "delete":
            assert store.delete(op[1], op[2]) == legacy.delete(op[1], op[2]), op
        else:
            assert store.versions(op[1]) == legacy.versions(op[1]), op
        assert sorted(store.keys()) == sorted(legacy.keys())
        assert len(store) == len(legacy)
        assert store.observed_stream_time == legacy.observed_stream_time
        assert store.dropped_records == legacy.dropped_records
    for record, fields in returned:
        assert tuple(record) == fields and type(record) is VersionedRecord
