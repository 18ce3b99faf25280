"""The session store's public session-entry operations that session aggregation uses
(docs/stores.md, "Session store"): ``find_mergeable(key, timestamp, gap)``,
``replace_sessions(key, removed, start, end, agg)``, ``session_entries()``, ``last_write_created``
and ``unpack_session``; on the store and on its change-logging wrapper."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.records import Windowed
from streamproc.stores import SessionStore, Stores, change_logged
from streamproc.stores.session import AGG, END, KEY, START

from .hypothesis_settings import PROPERTY
from .strategies import keys, present_values, times


def store_with(*sessions: tuple[str, int, int, Any], retention: int = 1000) -> SessionStore:
    s = Stores.in_memory_session_store("s", retention)
    for k, start, end, agg in sessions:
        s.put(Windowed(k, start, end), agg)
    return s


def test_entry_layout() -> None:
    assert (END, START, AGG, KEY) == (0, 1, 2, 3)
    s = store_with(("k", 3, 7, "x"))
    assert s.session_entries() == [[7, 3, "x", "k"]]


def test_find_mergeable_is_find_sessions_within_the_gap() -> None:
    s = store_with(("k", 0, 99, 1), ("k", 101, 200, 2), ("k", 201, 300, 3), ("k", 301, 400, 4), ("j", 150, 150, 9))
    found = s.find_mergeable("k", 225, 75)   # end >= 150 and start <= 300
    assert [(e[START], e[END], e[AGG], e[KEY]) for e in found] == [(101, 200, 2, "k"), (201, 300, 3, "k")]
    assert s.find_mergeable("k", 500, 10) == []
    assert s.find_mergeable("nobody", 100, 1000) == []


@PROPERTY
@given(st.lists(st.tuples(keys, times, st.integers(0, 20), present_values), max_size=40), keys,
       st.integers(-10, 170), st.integers(0, 30))
def test_find_mergeable_equals_find_sessions(puts: list, key: str, ts: int, gap: int) -> None:
    s = store_with(*[(k, start, start + length, agg) for k, start, length, agg in puts], retention=60)
    found = s.find_mergeable(key, ts, gap)
    expected = [(kv.key.key, kv.key.start, kv.key.end, kv.value) for kv in s.find_sessions(key, ts - gap, ts + gap)]
    assert [(e[KEY], e[START], e[END], e[AGG]) for e in found] == expected


def test_find_mergeable_rejects_a_none_key() -> None:
    with pytest.raises(ValueError, match="session store 's'"):
        store_with().find_mergeable(None, 0, 1)


def test_replace_sessions_merges_and_returns_the_live_entry() -> None:
    s = store_with(("k", 0, 5, 1), ("k", 10, 12, 2), ("k", 40, 40, 7))
    found = s.find_mergeable("k", 8, 3)           # [0, 5] and [10, 12]
    assert len(found) == 2
    entry = s.replace_sessions("k", found, 0, 12, 4)
    assert entry is not None and entry[:] == [12, 0, 4, "k"]
    assert [e[AGG] for e in found] == [None, None] or entry in found  # removed entries left the store
    assert [(kv.key, kv.value) for kv in s.fetch("k")] == [(Windowed("k", 0, 12), 4), (Windowed("k", 40, 40), 7)]
    assert s.last_write_created is True
    assert sorted(map(tuple, s.session_entries())) == [(12, 0, 4, "k"), (40, 40, 7, "k")]


def test_replace_sessions_extends_one_session_in_place() -> None:
    s = store_with(("k", 0, 5, 1))
    (old,) = s.find_mergeable("k", 7, 3)
    entry = s.replace_sessions("k", [old], 0, 7, 2)
    assert entry is old and old == [7, 0, 2, "k"]    # the same list, with its new window
    assert s.fetch_session("k", 0, 5) is None and s.fetch_session("k", 0, 7) == 2
    assert s.last_write_created is True              # a new window (the old one is gone)


def test_replace_sessions_of_the_same_window_overwrites() -> None:
    s = store_with(("k", 0, 5, 1))
    found = s.find_mergeable("k", 3, 0)
    entry = s.replace_sessions("k", found, 0, 5, 9)
    assert entry is found[0] and s.fetch_session("k", 0, 5) == 9
    assert s.last_write_created is False


def test_replace_sessions_without_removed_sessions_is_a_put() -> None:
    s = store_with(("k", 0, 5, 1))
    entry = s.replace_sessions("k", [], 50, 50, 1)
    assert entry == [50, 50, 1, "k"] and s.last_write_created is True
    assert s.observed_stream_time == 50


def test_a_removed_or_expired_entry_reads_agg_none() -> None:
    s = store_with(("k", 0, 5, 1), ("j", 1, 2, 3), retention=10)
    (k_entry,) = s.find_mergeable("k", 0, 0)
    (j_entry,) = s.find_mergeable("j", 1, 0)
    s.remove(Windowed("k", 0, 5))
    assert k_entry[AGG] is None
    s.put(Windowed("x", 100, 100), 1)           # observed 100: [1, 2] expires
    assert j_entry[AGG] is None
    assert s.session_entries() == [[100, 100, 1, "x"]]


def test_replace_sessions_of_an_expired_session_is_dropped() -> None:
    s = store_with(("k", 100, 100, 1), retention=10)
    assert s.replace_sessions("k", [], 50, 60, 1) is None
    assert s.dropped_records == 1 and s.fetch_session("k", 50, 60) is None


@PROPERTY
@given(retention=st.integers(0, 60),
       steps=st.lists(st.tuples(keys, times, st.integers(0, 10), present_values), min_size=1, max_size=50))
def test_replace_sessions_has_the_effects_of_remove_then_put(retention: int, steps: list) -> None:
    """Aggregation-style steps (merge every session within the gap) on one store through the entry
    operations and on another through ``remove``/``put``: same contents, time, drops, sizes."""
    fast = Stores.in_memory_session_store("s", retention)
    public = Stores.in_memory_session_store("s", retention)
    for key, ts, gap, agg in steps:
        found = fast.find_mergeable(key, ts, gap)
        start = min([ts] + [e[START] for e in found])
        end = max([ts] + [e[END] for e in found])
        windows = [Windowed(e[KEY], e[START], e[END]) for e in found]
        got = fast.replace_sessions(key, found, start, end, agg)
        for w in windows:
            public.remove(w)
        assert (got is not None) == public.put(Windowed(key, start, end), agg)
        assert [(kv.key, kv.value) for kv in fast.all()] == [(kv.key, kv.value) for kv in public.all()]
        assert (fast.observed_stream_time, fast.dropped_records, len(fast)) == \
            (public.observed_stream_time, public.dropped_records, len(public))
        assert sorted(map(tuple, fast.session_entries())) == \
            sorted((kv.key.end, kv.key.start, kv.value, kv.key.key) for kv in public.all())


def test_last_write_created_follows_put() -> None:
    s = store_with()
    s.put(Windowed("k", 0, 1), 1)
    assert s.last_write_created is True
    s.put(Windowed("k", 0, 1), 2)
    assert s.last_write_created is False


def test_unpack_session_checks_like_put() -> None:
    s = store_with()
    assert s.unpack_session(Windowed("k", 1, 2)) == ("k", 1, 2)
    with pytest.raises(TypeError, match="session must be a Windowed"):
        s.unpack_session(("k", 1, 2))
    with pytest.raises(ValueError, match="start <= end"):
        s.unpack_session(Windowed("k", 3, 2))
    with pytest.raises(TypeError, match="window.start"):
        s.unpack_session(Windowed("k", "1", 2), "window")
    assert len(s) == 0 and s.observed_stream_time == -1


def test_the_change_logging_wrapper_offers_the_same_operations() -> None:
    inner = store_with(("k", 0, 5, 1))
    s = change_logged(inner)
    s.drain()
    found = s.find_mergeable("k", 7, 3)
    assert found == inner.find_mergeable("k", 7, 3)
    entry = s.replace_sessions("k", found, 0, 7, 2)
    assert entry == [7, 0, 2, "k"] and s.session_entries() == inner.session_entries() == [entry]
    # logged like remove([0, 5]) then put([0, 7]): a tombstone for the old window, a put for the new
    assert [(r.value is None) for r in s.drain()] == [True, False]
