"""docs/semantics.md, "Session store": the in-memory session store (KIP-94), black-box against ``SessionModel``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import Windowed
from streamproc.stores import Stores

from ._util import kvs, seqs
from .models import SessionModel


def _as_model(items: list[tuple]) -> list[tuple]:
    return [((k, s, e), a) for k, s, e, a in items]


def test_kip_example_find_sessions() -> None:
    """The KIP's example: [0,99] [101,200] [201,300] [301,400]; find_sessions(k, 150, 300)."""
    s = Stores.in_memory_session_store("s", 10_000)
    for start, end in [(0, 99), (101, 200), (201, 300), (301, 400)]:
        s.put(Windowed("k", start, end), f"{start}-{end}")
    assert kvs(s.find_sessions("k", 150, 300)) == [(("k", 101, 200), "101-200"), (("k", 201, 300), "201-300")]


def test_find_sessions_bounds_are_inclusive() -> None:
    s = Stores.in_memory_session_store("s", 10_000)
    s.put(Windowed("k", 10, 20), 1)
    assert kvs(s.find_sessions("k", 20, 10)) == [(("k", 10, 20), 1)]  # end >= 20 and start <= 10
    assert kvs(s.find_sessions("k", 21, 10)) == []
    assert kvs(s.find_sessions("k", 20, 9)) == []
    assert kvs(s.find_sessions("other", 0, 100)) == []


def test_expiry_is_strict() -> None:
    """A session with ``end < observed - retention`` (strict) is expired and dropped."""
    s = Stores.in_memory_session_store("s", 100)
    s.put(Windowed("a", 0, 0), "old")
    s.put(Windowed("a", 1, 1), "keep")
    s.put(Windowed("b", 100, 100), "x")  # observed 100: end 0 is not < 0
    assert s.fetch_session("a", 0, 0) == "old"
    s.put(Windowed("b", 101, 101), "y")  # observed 101: end 0 < 1 expired; end 1 is not
    assert s.fetch_session("a", 0, 0) is None
    assert s.fetch_session("a", 1, 1) == "keep"
    assert s.dropped_records == 0
    assert not s.put(Windowed("a", 0, 0), "late")  # end 0 < 101 - 100
    assert s.dropped_records == 1
    assert s.put(Windowed("a", 1, 1), "ok")  # end 1 == 101 - 100: live
    assert kvs(s.fetch("a")) == [(("a", 1, 1), "ok")]


def test_put_none_removes_and_remove() -> None:
    s = Stores.in_memory_session_store("s", 100)
    s.put(Windowed("a", 0, 5), 1)
    s.put(Windowed("a", 6, 9), 2)
    s.put(Windowed("a", 0, 5), None)
    assert kvs(s.fetch("a")) == [(("a", 6, 9), 2)]
    s.remove(Windowed("a", 6, 9))
    assert kvs(s.fetch("a")) == []
    assert kvs(s.all()) == []


def test_remove_leaves_observed_time_but_put_none_advances_it() -> None:
    """Kafka's ``remove`` only deletes; ``put(session, None)`` first advances observed (§2.1)."""
    s = Stores.in_memory_session_store("s", 5)
    s.put(Windowed("d", 0, 0), 59)
    assert s.remove(Windowed("x", 3, 6))          # absent: a no-op
    assert s.observed_stream_time == 0
    assert kvs(s.all()) == [(("d", 0, 0), 59)]    # nothing expired
    s.put(Windowed("x", 3, 6), None)              # absent too, but a put: observed = 6, [0,0] expires
    assert s.observed_stream_time == 6
    assert kvs(s.all()) == []


def test_ordering_by_end_then_key_then_start() -> None:
    s = Stores.in_memory_session_store("s", 10_000)
    sessions = [("b", 5, 10), ("a", 7, 10), ("a", 2, 10), ("c", 0, 3), ("a", 12, 20), ("b", 15, 15)]
    for k, start, end in sessions:
        s.put(Windowed(k, start, end), f"{k}{start}")
    expected = [(("c", 0, 3), "c0"), (("a", 2, 10), "a2"), (("a", 7, 10), "a7"), (("b", 5, 10), "b5"),
                (("b", 15, 15), "b15"), (("a", 12, 20), "a12")]
    assert kvs(s.all()) == expected
    assert kvs(s.fetch_keys(None, None)) == expected
    assert kvs(s.fetch_keys("a", "b")) == [e for e in expected if e[0][0] in "ab"]
    assert kvs(s.fetch_keys("b", None)) == [e for e in expected if e[0][0] in "bc"]
    assert kvs(s.fetch_keys("b", "a")) == []
    assert kvs(s.fetch("a")) == [(("a", 2, 10), "a2"), (("a", 7, 10), "a7"), (("a", 12, 20), "a12")]
    assert kvs(s.find_sessions("a", 0, 100)) == kvs(s.fetch("a"))
    assert s.fetch_session("b", 5, 10) == "b5"
    assert s.fetch_session("b", 5, 11) is None


def test_validation_and_durations() -> None:
    with pytest.raises(ValueError, match="retention"):
        Stores.in_memory_session_store("s", -1)
    with pytest.raises(ValueError):
        Stores.in_memory_session_store("", 10)
    a = Stores.in_memory_session_store("s", timedelta(milliseconds=10))
    a.put(Windowed("k", 0, 0), 1)
    a.put(Windowed("k", 20, 20), 1)
    assert kvs(a.all()) == [(("k", 20, 20), 1)]
    store = Stores.in_memory_session_store("sessions-x", 10)
    with pytest.raises((ValueError, TypeError), match="sessions-x"):
        store.put(Windowed(None, 0, 0), 1)
    with pytest.raises(TypeError, match="sessions-x"):
        store.find_sessions("k", "0", 10)  # type: ignore[arg-type]


def test_snapshot_reads() -> None:
    s = Stores.in_memory_session_store("s", 10)
    s.put(Windowed("a", 0, 1), 1)
    it = s.all()
    it_find = s.find_sessions("a", 0, 10)
    s.put(Windowed("a", 0, 1), None)
    s.put(Windowed("b", 100, 100), 2)
    assert kvs(it) == [(("a", 0, 1), 1)]
    assert kvs(it_find) == [(("a", 0, 1), 1)]


# -- property test -------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, int, int]:
    start = draw(st.integers(0, 60))
    return draw(KEYS), start, start + draw(st.integers(0, 15))


OPS = st.one_of(
    st.tuples(st.just("put"), windows(), st.integers(0, 9)),
    st.tuples(st.just("put"), windows(), st.none()),
    st.tuples(st.just("remove"), windows()),
    st.tuples(st.just("find"), KEYS, st.integers(0, 80), st.integers(0, 80)),
    # bounds at an existing session's end/start (+-1): the inclusive boundaries
    st.tuples(st.just("find_edge"), st.integers(0, 99), st.integers(-1, 1), st.integers(-1, 1)),
    st.tuples(st.just("fetch_session"), windows()),
    st.tuples(st.just("fetch"), KEYS),
    st.tuples(st.just("fetch_keys"), st.none() | KEYS, st.none() | KEYS),
    st.tuples(st.just("all"), st.booleans()),
)


@given(st.integers(0, 40), seqs(OPS, 40, 100))
def test_session_store_matches_model(retention: int, ops: list[tuple]) -> None:
    """``put(windowed, None)`` advances observed; ``remove`` (as Kafka's) only deletes the session."""
    store = Stores.in_memory_session_store("s", retention)
    model = SessionModel(retention)
    for op in ops:
        name = op[0]
        if name == "put":
            (k, s, e), agg = op[1], op[2]
            assert store.put(Windowed(k, s, e), agg) == model.put(k, s, e, agg), op
        elif name == "remove":
            k, s, e = op[1]
            store.remove(Windowed(k, s, e))
            model.remove(k, s, e)
        elif name == "find_edge":
            live = model.live()
            if live:
                k, s, e, _ = live[op[1] % len(live)]
                args = (k, e + op[2], s + op[3])
                assert kvs(store.find_sessions(*args)) == _as_model(model.find_sessions(*args)), (op, args)
        elif name == "find":
            assert kvs(store.find_sessions(*op[1:])) == _as_model(model.find_sessions(*op[1:])), op
        elif name == "fetch_session":
            assert store.fetch_session(*op[1]) == model.fetch_session(*op[1]), op
        elif name == "fetch":
            assert kvs(store.fetch(op[1])) == _as_model(model.fetch(op[1])), op
        elif name == "fetch_keys":
            assert kvs(store.fetch_keys(*op[1:])) == _as_model(model.fetch_keys(*op[1:])), op
        else:
            got = kvs(store.all(backward=op[1]))
            want = _as_model(model.live())
            assert got == (want[::-1] if op[1] else want), op
    assert store.dropped_records == model.dropped
    assert store.observed_stream_time == model.observed


def test_argument_names_of_semantics_md() -> None:
    s = Stores.in_memory_session_store(name="s", retention=100)
    s.put(Windowed("k", 1, 5), agg=3)
    assert kvs(s.find_sessions(key="k", earliest_session_end=5, latest_session_start=1)) == [(("k", 1, 5), 3)]
    assert s.fetch_session(key="k", start=1, end=5) == 3
    assert kvs(s.fetch(key="k")) == [(("k", 1, 5), 3)]
    assert kvs(s.fetch_keys(key_from="k", key_to="k")) == [(("k", 1, 5), 3)]
    s.remove(Windowed("k", 1, 5))
    assert kvs(s.all()) == []
