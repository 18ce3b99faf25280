"""docs/semantics.md, "Window store": the in-memory window store (KIP-428), black-box against ``WindowModel``."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import Windowed
from streamproc.stores import Stores

from ._util import kvs, seqs
from .models import WindowModel

# -- factory validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "needles"),
    [
        # name empty wins over everything else
        (("", -1, -1), {"grace": -1}, ["name"]),
        # retention < 0 is checked before window_size < 0 and grace < 0
        (("w", -5, -7), {"grace": -9}, ["w", "retention", "-5"]),
        # window_size < 0 before grace < 0
        (("w", 10, -7), {"grace": -9}, ["w", "window_size", "-7"]),
        # grace < 0 before size > retention
        (("w", 10, 20), {"grace": -9}, ["w", "grace", "-9"]),
        # size > retention before grace > retention
        (("w", 10, 20), {"grace": 30},
         [("The retention period of the window store w must be no smaller than its window size. "
          "Got size=[20], retention=[10]")]),
        (("w", 10, 5), {"grace": 30},
         [("The grace period of the window store w must not exceed its retention period. "
          "Got grace period=[30], retention=[10]")]),
    ],
)
def test_validation_order_and_messages(args: tuple, kwargs: dict, needles: list[str]) -> None:
    """§1 Validation: each check is a ValueError naming the store and values, in the listed order."""
    with pytest.raises(ValueError) as err:
        Stores.in_memory_window_store(*args, **kwargs)
    for needle in needles:
        assert needle in str(err.value)


def test_timedelta_messages_show_milliseconds() -> None:
    """§0 + §1: timedelta durations are normalised to ms, also in the messages."""
    with pytest.raises(ValueError, match=r"Got size=\[2000\], retention=\[1000\]"):
        Stores.in_memory_window_store("w", timedelta(seconds=1), timedelta(seconds=2))


@pytest.mark.parametrize("retention", [0, 1, 10])
def test_size_and_grace_equal_to_retention_are_valid(retention: int) -> None:
    """Bounds: ``window_size == retention`` and ``grace == retention`` are allowed."""
    Stores.in_memory_window_store("w", retention, retention, grace=retention)


def test_grace_defaults_to_retention() -> None:
    """``grace`` defaults to ``retention``: a put is late only at ``start <= observed - retention``."""
    s = Stores.in_memory_window_store("w", 100, 10)
    s.put("x", 1, 199)
    assert s.put("a", 1, 100)  # 100 > 199 - 100
    assert not s.put("b", 1, 99)  # 99 <= 99
    assert s.get("a", 100) == 1 and s.get("b", 99) is None


# -- boundaries -----------------------------------------------------------------------------------


def test_expiry_exactly_at_the_retention_boundary() -> None:
    """A window start ``s`` is expired when ``s <= observed - retention`` (inclusive)."""
    s = Stores.in_memory_window_store("w", 100, 10, grace=10)
    s.put("a", "v0", 0)
    s.put("a", "v1", 1)
    s.put("b", "x", 99)
    assert s.get("a", 0) == "v0"  # 0 > 99 - 100
    s.put("b", "x", 100)  # observed 100: start 0 is expired, start 1 is not
    assert s.get("a", 0) is None
    assert s.get("a", 1) == "v1"
    assert kvs(s.fetch("a", 0, 200)) == [(1, "v1")]
    assert kvs(s.fetch_all(None, None)) == [(("a", 1, 11), "v1"), (("b", 99, 109), "x"), (("b", 100, 110), "x")]


def test_late_put_exactly_at_the_grace_boundary_is_dropped_and_counted() -> None:
    """``window_start <= observed - grace`` is late: dropped and counted in ``dropped_records``."""
    s = Stores.in_memory_window_store("w", 100, 10, grace=30)
    s.put("a", 1, 100)
    assert s.dropped_records == 0
    assert not s.put("a", 2, 70)  # 70 <= 100 - 30
    assert s.dropped_records == 1
    assert s.put("a", 3, 71)
    assert s.get("a", 70) is None and s.get("a", 71) == 3
    # a late tombstone is dropped as well: it does not delete
    assert not s.put("a", None, 70)
    assert s.dropped_records == 2


def test_put_into_expired_window_is_dropped() -> None:
    s = Stores.in_memory_window_store("w", 50, 10)
    s.put("a", 1, 1000)
    assert not s.put("a", 1, 950)
    assert not s.put("a", 1, 10)
    assert s.dropped_records == 2
    assert kvs(s.all()) == [(("a", 1000, 1010), 1)]


def test_grace_zero_drops_even_the_newest_start() -> None:
    """Literal reading of §1: with grace 0, ``start <= observed - 0`` holds for every put (the store
    observes the start first), so every put is dropped."""
    s = Stores.in_memory_window_store("w", 10, 5, grace=0)
    assert not s.put("a", 1, 0)
    assert not s.put("a", 1, 5)
    assert kvs(s.all()) == []
    assert s.dropped_records == 2


def test_stream_time_starts_at_minus_one_and_never_decreases() -> None:
    s = Stores.in_memory_window_store("w", 10, 5)
    assert s.observed_stream_time == -1
    s.put("a", 1, 7)
    s.put("a", 1, 3)
    assert s.observed_stream_time == 7
    s.put("a", 1, 1)  # late: still observes nothing larger
    assert s.observed_stream_time == 7


def test_none_value_deletes_and_is_noop_with_duplicates() -> None:
    s = Stores.in_memory_window_store("w", 100, 10)
    s.put("a", 1, 5)
    s.put("a", None, 5)
    assert s.get("a", 5) is None
    assert kvs(s.all()) == []
    d = Stores.in_memory_window_store("d", 100, 10, retain_duplicates=True)
    d.put("a", 1, 5)
    d.put("a", 2, 5)
    d.put("a", None, 5)
    assert kvs(d.fetch("a", 0, 10)) == [(5, 1), (5, 2)]


def test_fetch_time_bounds_are_inclusive_and_clamped_to_retention() -> None:
    s = Stores.in_memory_window_store("w", 20, 5)
    for t in range(31):
        s.put("k", t, t)
    # observed 30: live starts are >= 30 - 20 + 1 = 11
    assert [t for t, _ in kvs(s.fetch("k", 0, 13))] == [11, 12, 13]
    assert [t for t, _ in kvs(s.fetch("k", 15, 17))] == [15, 16, 17]
    assert [t for t, _ in kvs(s.fetch("k", 17, 15, backward=True))] == []
    assert [t for t, _ in kvs(s.fetch("k", 28, 99, backward=True))] == [30, 29, 28]


def test_fetch_keys_inverted_range_yields_nothing_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    s = Stores.in_memory_window_store("w", 20, 5)
    s.put("a", 1, 1)
    s.put("b", 1, 1)
    with caplog.at_level(logging.WARNING):
        assert kvs(s.fetch_keys("b", "a", 0, 10)) == []
    assert any(r.levelno >= logging.WARNING for r in caplog.records)


def test_range_reads_order_and_window_end() -> None:
    """``Windowed(key, start, start + size)``, ordered by start then key; ``None`` bounds are open."""
    s = Stores.in_memory_window_store("w", 1000, 7)
    for key, start in [("b", 3), ("a", 3), ("c", 1), ("a", 9), ("b", 1)]:
        s.put(key, f"{key}{start}", start)
    expected = [(("b", 1, 8), "b1"), (("c", 1, 8), "c1"), (("a", 3, 10), "a3"), (("b", 3, 10), "b3"),
                (("a", 9, 16), "a9")]
    assert kvs(s.all()) == expected
    assert kvs(s.all(backward=True)) == expected[::-1]
    assert kvs(s.fetch_all(None, None)) == expected
    assert kvs(s.fetch_keys(None, None, None, None)) == expected
    assert kvs(s.fetch_keys("b", None, None, 3)) == [(("b", 1, 8), "b1"), (("c", 1, 8), "c1"), (("b", 3, 10), "b3")]
    assert kvs(s.fetch_keys(None, "a", 2, None)) == [(("a", 3, 10), "a3"), (("a", 9, 16), "a9")]
    item = next(iter(s.all()))
    assert isinstance(item[0], Windowed)


def test_str_keys_follow_utf8_byte_order() -> None:
    """§0: str keys in natural Python order, which equals the order of their UTF-8 bytes."""
    s = Stores.in_memory_window_store("w", 1000, 7)
    keys = ["é", "z", "\U0001f600", "\uffff", "Z", "a"]
    for k in keys:
        s.put(k, 1, 0)
    got = [w[0] for w, _ in kvs(s.all())]
    assert got == sorted(keys, key=lambda k: k.encode("utf-8"))


def test_snapshot_reads() -> None:
    """An iterator returns the state at the call; later puts, deletes and expiry do not change it."""
    s = Stores.in_memory_window_store("w", 10, 5, grace=10)
    s.put("a", 1, 0)
    s.put("b", 2, 1)
    it_all = s.all()
    it_fetch = s.fetch("a", 0, 100)
    it_keys = s.fetch_keys("a", "b", 0, 100, backward=True)
    s.put("a", None, 0)  # delete
    s.put("c", 3, 2)  # insert
    s.put("b", 20, 1)  # overwrite
    s.put("z", 9, 50)  # expires everything above
    assert kvs(s.all()) == [(("z", 50, 55), 9)]
    assert kvs(it_all) == [(("a", 0, 5), 1), (("b", 1, 6), 2)]
    assert kvs(it_fetch) == [(0, 1)]
    assert kvs(it_keys) == [(("b", 1, 6), 2), (("a", 0, 5), 1)]


def test_durations_accept_timedelta() -> None:
    a = Stores.in_memory_window_store("w", timedelta(milliseconds=100), timedelta(milliseconds=10),
                                      grace=timedelta(milliseconds=30))
    b = Stores.in_memory_window_store("w", 100, 10, grace=30)
    for s in (a, b):
        s.put("k", 1, 100)
        s.put("k", 2, 71)
        s.put("k", 3, 70)
    assert kvs(a.all()) == kvs(b.all()) == [(("k", 71, 81), 2), (("k", 100, 110), 1)]


def test_bad_arguments_name_the_store() -> None:
    s = Stores.in_memory_window_store("clicks", 10, 5)
    with pytest.raises((ValueError, TypeError), match="clicks"):
        s.put(None, 1, 0)
    with pytest.raises(TypeError, match="clicks"):
        s.put("a", 1, "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clicks"):
        s.put("a", 1, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clicks"):
        s.put("a", 1, 1)
        s.put(2, 1, 1)
        list(s.all())
    with pytest.raises(TypeError, match="retention"):
        Stores.in_memory_window_store("w", "10", 5)  # type: ignore[arg-type]


# -- property test against the model ------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c", "d"])
TIME = st.integers(0, 60)
OPT_KEY = st.none() | KEYS
OPT_TIME = st.none() | TIME

OPS = st.one_of(
    st.tuples(st.just("put"), KEYS, st.none() | st.integers(0, 9), TIME),
    # a put relative to the store's observed time: hits the late/expiry boundaries often
    st.tuples(st.just("put_rel"), KEYS, st.integers(0, 9), st.integers(-32, 3)),
    st.tuples(st.just("put"), KEYS, st.integers(0, 9), TIME),
    st.tuples(st.just("get"), KEYS, TIME),
    st.tuples(st.just("fetch"), KEYS, TIME, TIME, st.booleans()),
    st.tuples(st.just("fetch_keys"), OPT_KEY, OPT_KEY, OPT_TIME, OPT_TIME, st.booleans()),
    st.tuples(st.just("all"), st.booleans()),
)


@st.composite
def configs(draw: st.DrawFn) -> tuple[int, int, int | None, bool]:
    retention = draw(st.integers(0, 30))
    size = draw(st.integers(0, retention))
    grace = draw(st.none() | st.integers(0, retention))
    return retention, size, grace, draw(st.booleans())


def _shift(ops: list[tuple], base: int) -> list[tuple]:
    """The same operations ``base`` milliseconds later (every time argument moved, None bounds kept)."""
    times = {"put": (3,), "put_rel": (), "get": (2,), "fetch": (2, 3), "fetch_keys": (3, 4), "all": ()}
    out = []
    for op in ops:
        fields = list(op)
        for i in times[fields[0]]:
            if fields[i] is not None:
                fields[i] += base
        out.append(tuple(fields))
    return out


@given(configs(), seqs(OPS, 40, 100), st.sampled_from([0, 1_700_000_000_000]))
def test_window_store_matches_model(config: tuple[int, int, int | None, bool], ops: list[tuple],
                                    base: int) -> None:
    """``base``: the same operations at realistic epoch-millisecond timestamps."""
    ops = _shift(ops, base)
    retention, size, grace, dups = config
    store = Stores.in_memory_window_store("w", retention, size, grace=grace, retain_duplicates=dups)
    model = WindowModel(retention, size, grace, dups)
    for op in ops:
        name, args = op[0], op[1:]
        if name == "put_rel":
            key, value, delta = args
            args = (key, value, max(base, model.observed + delta))
            name = "put"
        if name == "put":
            assert store.put(*args) == model.put(*args), op
        elif name == "get":
            if dups:
                continue  # §1 does not say which duplicate get returns
            assert store.get(*args) == model.get(*args), op
        elif name == "fetch":
            key, tf, tt, back = args
            assert kvs(store.fetch(key, tf, tt, backward=back)) == model.fetch(key, tf, tt, back), op
        elif name == "fetch_keys":
            kf, kt, tf, tt, back = args
            assert kvs(store.fetch_keys(kf, kt, tf, tt, backward=back)) == model.fetch_keys(kf, kt, tf, tt, back), op
            if kf is None and kt is None:
                assert kvs(store.fetch_all(tf, tt, backward=back)) == model.fetch_keys(None, None, tf, tt, back)
        else:
            assert kvs(store.all(backward=args[0])) == model.fetch_keys(None, None, None, None, args[0]), op
    assert store.dropped_records == model.dropped
    assert store.observed_stream_time == model.observed
    # every window of every key at the end (expiry boundaries included)
    for key in {op[1] for op in ops if op[0] in ("put", "put_rel")}:
        if not dups:
            for start in range(base, max(base + 61, model.observed + 1)):
                assert store.get(key, start) == model.get(key, start), (key, start)
        assert kvs(store.fetch(key, base - 1, base + 61)) == model.fetch(key, base - 1, base + 61)


def test_argument_names_of_semantics_md() -> None:
    """Every call written with the argument names docs/stores.md uses."""
    s = Stores.in_memory_window_store(name="w", retention=100, window_size=10, grace=50, retain_duplicates=False)
    assert s.put(key="a", value=1, window_start=5)
    assert s.get(key="a", window_start=5) == 1
    assert kvs(s.fetch(key="a", time_from=0, time_to=10, backward=True)) == [(5, 1)]
    assert kvs(s.fetch_keys(key_from="a", key_to="a", time_from=0, time_to=10, backward=False)) == [(("a", 5, 15), 1)]
    assert kvs(s.fetch_all(time_from=0, time_to=10, backward=False)) == [(("a", 5, 15), 1)]
    assert kvs(s.all(backward=True)) == [(("a", 5, 15), 1)]


def _ops(keys: st.SearchStrategy, time: st.SearchStrategy) -> st.SearchStrategy:
    opt_key = st.none() | keys
    opt_time = st.none() | time
    return st.one_of(
        st.tuples(st.just("put"), keys, st.integers(0, 9), time),
        st.tuples(st.just("put"), keys, st.none(), time),
        st.tuples(st.just("get"), keys, time),
        st.tuples(st.just("fetch"), keys, time, time, st.booleans()),
        st.tuples(st.just("fetch_keys"), opt_key, opt_key, opt_time, opt_time, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
    )


PREFILL = st.lists(st.tuples(st.just("put"), st.integers(0, 99), st.integers(0, 9), st.integers(0, 1)),
                  min_size=40, max_size=100)


@given(configs(), PREFILL, st.lists(_ops(st.integers(0, 99), st.integers(0, 3)), max_size=60))
def test_window_store_with_many_keys_per_window_matches_model(config: tuple[int, int, int | None, bool],
                                                              prefill: list[tuple], ops: list[tuple]) -> None:
    """Many keys in few windows (large segments), int keys."""
    test_window_store_matches_model.hypothesis.inner_test(config, prefill + ops, 0)  # type: ignore[attr-defined]  # starts 0..3  # type: ignore[attr-defined]
