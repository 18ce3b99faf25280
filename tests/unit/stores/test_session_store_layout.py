"""The per-key session store against the layout it replaced (``LegacySessionStore``), on random
operation sequences with expiry: every read, ``observed_stream_time``, ``dropped_records`` and the
size must agree after every step. Also the session-entry operations session aggregation uses
(``find_mergeable`` then ``replace_sessions``) against the equivalent public calls (``find_sessions``, ``remove`` each, ``put``),
directly and through the change-logging wrapper (same drained changelog records)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamproc.records import Windowed
from streamproc.stores import SessionStore, Stores, change_logged

from .hypothesis_settings import PROPERTY
from .legacy_session_store import LegacySessionStore
from .strategies import bound_keys, keys

times = st.integers(0, 150)
lengths = st.integers(0, 30)
aggs = st.integers(0, 9)

# ("replace", key, ts, lo, hi, mode, agg): find the sessions of `key` a record at ts merges with for
# gap lo (end >= ts - lo and start <= ts + lo), then replace `removed` (all / none / the first / the last) by a new session: the
# merge of [ts, ts] with every found session (mode "merge", what the processor does) or [ts, ts + hi].
replace_ops = st.tuples(st.just("replace"), keys, times, st.integers(0, 20), st.integers(0, 20),
                        st.sampled_from(["merge", "all", "none", "first", "last"]), aggs)
layout_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys, times, lengths, st.one_of(st.none(), aggs)),
        st.tuples(st.just("put"), keys, times, lengths, aggs),
        st.tuples(st.just("remove"), keys, times, lengths),
        replace_ops,
        replace_ops,
        st.tuples(st.just("find"), keys, st.integers(-5, 190), st.integers(-5, 190), st.booleans()),
        st.tuples(st.just("fetch_session"), keys, times, lengths),
        st.tuples(st.just("fetch"), keys, st.booleans()),
        st.tuples(st.just("fetch_keys"), bound_keys, bound_keys, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
    ),
    max_size=80,
)


def rows(it: Any) -> list[tuple[tuple[Any, int, int], Any]]:
    return [((kv.key.key, kv.key.start, kv.key.end), kv.value) for kv in it]


def replace_plan(store: Any, op: tuple) -> tuple[list[Any], list[Windowed], Windowed]:
    """``(entries to pass to replace_sessions, the same sessions as Windowed, the new session)``."""
    _, k, ts, lo, hi, mode, _agg = op
    found = store.find_mergeable(k, ts, lo)
    windows = [Windowed(e[3], e[1], e[0]) for e in found]
    if mode == "merge":
        start = min([ts] + [w.start for w in windows])
        end = max([ts] + [w.end for w in windows])
        return found, windows, Windowed(k, start, end)
    chosen = {"all": slice(None), "none": slice(0), "first": slice(1), "last": slice(-1, None)}[mode]
    return found[chosen], windows[chosen], Windowed(k, ts, ts + hi)


def apply(store: Any, legacy: LegacySessionStore, op: tuple) -> None:
    name = op[0]
    if name == "put":
        _, k, start, length, agg = op
        assert store.put(Windowed(k, start, start + length), agg) == legacy.put(Windowed(k, start, start + length), agg)
    elif name == "remove":
        _, k, start, length = op
        assert store.remove(Windowed(k, start, start + length)) == legacy.remove(Windowed(k, start, start + length))
    elif name == "replace":
        removed, windows, new = replace_plan(store, op)
        assert rows(legacy.find_sessions(op[1], op[2] - op[3], op[2] + op[3])) == \
            rows(store.find_sessions(op[1], op[2] - op[3], op[2] + op[3]))
        got = store.replace_sessions(new.key, removed, new.start, new.end, op[6])
        for w in windows:
            assert legacy.remove(w)
        assert bool(got) == legacy.put(new, op[6])
    elif name == "find":
        _, k, ee, ls, backward = op
        assert rows(store.find_sessions(k, ee, ls, backward)) == rows(legacy.find_sessions(k, ee, ls, backward))
    elif name == "fetch_session":
        _, k, start, length = op
        assert store.fetch_session(k, start, start + length) == legacy.fetch_session(k, start, start + length)
    elif name == "fetch":
        assert rows(store.fetch(op[1], backward=op[2])) == rows(legacy.fetch(op[1], backward=op[2]))
    elif name == "fetch_keys":
        assert rows(store.fetch_keys(op[1], op[2], op[3])) == rows(legacy.fetch_keys(op[1], op[2], op[3]))
    else:
        assert rows(store.all(op[1])) == rows(legacy.all(op[1]))
    assert store.observed_stream_time == legacy.observed_stream_time, op
    assert store.dropped_records == legacy.dropped_records, op
    assert len(store) == len(legacy), op


@PROPERTY
@given(st.integers(0, 80), layout_ops)
def test_per_key_layout_matches_the_previous_layout(retention: int, ops: list) -> None:
    store = Stores.in_memory_session_store("s", retention)
    legacy = LegacySessionStore("s", retention)
    for op in ops:
        apply(store, legacy, op)
    assert rows(store.all()) == rows(legacy.all())


@PROPERTY
@given(st.integers(0, 80), layout_ops)
def test_replace_is_logged_like_remove_then_put_minus_short_lived_sessions(retention: int, ops: list) -> None:
    fast = change_logged(Stores.in_memory_session_store("s", retention))
    public = change_logged(Stores.in_memory_session_store("s", retention))
    fast_log: list[Any] = []
    public_log: list[Any] = []
    for i, op in enumerate(ops):
        if op[0] == "replace":
            removed, windows, new = replace_plan(fast, op)
            got = fast.replace_sessions(new.key, removed, new.start, new.end, op[6])
            for w in windows:
                public.remove(w)
            assert bool(got) == public.put(new, op[6])
        elif op[0] == "put":
            _, k, start, length, agg = op
            assert fast.put(Windowed(k, start, start + length), agg) == public.put(Windowed(k, start, start + length), agg)
        elif op[0] == "remove":
            _, k, start, length = op
            assert fast.remove(Windowed(k, start, start + length)) == public.remove(Windowed(k, start, start + length))
        if i % 7 == 0:
            drain_both(fast, public, fast_log, public_log)
    drain_both(fast, public, fast_log, public_log)
    assert rows(fast.all()) == rows(public.all())
    # both changelogs rebuild the live store (contents and observed stream time)
    live = (rows(fast.all()), fast.observed_stream_time)
    for log in (fast_log, public_log):
        rebuilt = change_logged(Stores.in_memory_session_store("s", retention))
        rebuilt.restore(log)
        assert (rows(rebuilt.all()), rebuilt.observed_stream_time) == live


def drain_both(fast: Any, public: Any, fast_log: list[Any], public_log: list[Any]) -> None:
    """Drain both stores: the fast path's records are the public path's, minus sessions created
    and merged away since the previous drain (put and tombstone both left out)."""
    f, p = fast.drain(), public.drain()
    assert set(f) <= set(p)
    left_out = {r.key for r in p} - {r.key for r in f}
    assert all(r.value is None for r in p if r.key in left_out), "only created-then-removed sessions are left out"
    fast_log += f
    public_log += p


def test_extending_the_latest_session_in_place_keeps_expiry_exact() -> None:
    s = SessionStore("s", 10)
    s.put(Windowed("k", 0, 0), 1)
    for t in range(1, 40):  # extend [0, t - 1] to [0, t] in place, 39 times
        found = s.find_mergeable("k", t, 5)
        assert s.replace_sessions("k", found, 0, t, t + 1)
    assert [(kv.key, kv.value) for kv in s.all()] == [(Windowed("k", 0, 39), 40)]
    s.put(Windowed("x", 45, 45), 1)  # observed 45: [0, 39] stays (39 >= 35)
    assert len(s) == 2
    s.put(Windowed("x", 50, 50), 1)  # observed 50: 39 < 40, expired
    assert s.fetch_session("k", 0, 39) is None and len(s) == 2
    assert [kv.key for kv in s.all()] == [Windowed("x", 45, 45), Windowed("x", 50, 50)]


def test_a_session_extended_in_place_is_found_over_its_whole_length() -> None:
    s = SessionStore("s", 1000)
    s.put(Windowed("k", 0, 0), 1)
    assert s.replace_sessions("k", s.find_mergeable("k", 0, 10), 0, 100, 2)   # [0, 0] -> [0, 100] in place
    s.put(Windowed("k", 200, 201), 3)
    assert [kv.key for kv in s.find_sessions("k", 50, 60)] == [Windowed("k", 0, 100)]


def test_an_in_place_extension_keeps_the_key_order() -> None:
    s = SessionStore("s", 1000)
    s.put(Windowed("k", 5, 10), "a")
    s.put(Windowed("k", 8, 10), "b")
    last = s.find_mergeable("k", 9, -1)[-1:]  # end >= 10 and start <= 8: [8, 10]
    assert s.replace_sessions("k", last, 2, 10, "c")  # [2, 10] now sorts before [5, 10]
    assert [(kv.key.start, kv.value) for kv in s.fetch("k")] == [(2, "c"), (5, "a")]
    assert [(kv.key.start, kv.value) for kv in s.find_sessions("k", 0, 3)] == [(2, "c")]


def test_a_key_of_another_type_is_rejected_before_anything_changes() -> None:
    s = SessionStore("s", 100)
    s.put(Windowed("a", 0, 5), 1)
    try:
        s.put(Windowed(7, 10, 500), 1)
    except TypeError as exc:
        assert "session store 's'" in str(exc) and "key 7" in str(exc)
    else:  # pragma: no cover - the assertion below reports it
        raise AssertionError("an int key next to str keys must be rejected")
    assert s.observed_stream_time == 5 and len(s) == 1


def test_reads_with_a_key_of_another_type_fail_like_the_ordered_layout() -> None:
    for store in (SessionStore("s", 100), LegacySessionStore("s", 100)):
        assert list(store.find_sessions(7, 0, 10)) == [] and list(store.fetch(7)) == []  # empty: no error
        store.put(Windowed("a", 0, 5), 1)
        for read in (lambda s: s.find_sessions(7, 0, 10), lambda s: s.fetch(7)):
            try:
                read(store)
            except TypeError as exc:
                assert "session store 's'" in str(exc)
            else:  # pragma: no cover
                raise AssertionError(f"{type(store).__name__}: an int key must not be readable next to str keys")
        assert store.fetch_session(7, 0, 5) is None  # a point lookup needs no order


def test_a_short_lived_session_replaced_by_an_expired_put_is_still_logged() -> None:
    """Regression (found by the property above): with retention 0, session [0,1] is created and then
    replaced by [0,0], whose put is dropped as expired. The changelog cannot elide [0,1]: nothing
    else in it would restore the observed time 1 it set."""
    store = change_logged(Stores.in_memory_session_store("s", 0))
    assert store.replace_sessions("a", [], 0, 1, 5) is not None
    assert store.replace_sessions("a", store.find_mergeable("a", 0, 0), 0, 0, 6) is None  # dropped: 0 < 1 - 0
    assert (len(store), store.observed_stream_time) == (0, 1)
    rebuilt = change_logged(Stores.in_memory_session_store("s", 0))
    rebuilt.restore(store.drain())
    assert (len(rebuilt), rebuilt.observed_stream_time) == (0, 1)


def test_drain_leaves_out_sessions_expired_since_they_were_put_and_restore_is_unchanged() -> None:
    store = change_logged(Stores.in_memory_session_store("s", 10))
    store.put(Windowed("a", 0, 5), 1)
    store.put(Windowed("b", 3, 8), 2)
    store.remove(Windowed("b", 3, 8))           # a tombstone is kept whatever its window's age
    store.put(Windowed("c", 30, 30), 3)         # observed 30: [0,5] and [3,8] end before 30 - 10
    store.put(Windowed("d", 21, 25), 4)         # still live (25 >= 20)
    drained = store.drain()
    assert [(r.key[-16:], r.value) for r in drained] == [
        ((8).to_bytes(8, "big") + (3).to_bytes(8, "big"), None),
        ((30).to_bytes(8, "big") + (30).to_bytes(8, "big"), b"3"),
        ((25).to_bytes(8, "big") + (21).to_bytes(8, "big"), b"4"),
    ]
    rebuilt = change_logged(Stores.in_memory_session_store("s", 10))
    rebuilt.restore(drained)
    assert rows(rebuilt.all()) == rows(store.all()) == [(("d", 21, 25), 4), (("c", 30, 30), 3)]
    assert rebuilt.observed_stream_time == store.observed_stream_time == 30
