"""Bad input raises ValueError/TypeError naming the store and the argument, and loses nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamproc.records import Windowed
from streamproc.stores import Stores, change_logged


def filled() -> dict[str, Any]:
    kv = Stores.in_memory_key_value_store("kv1")
    kv.put("a", 1)
    w = Stores.in_memory_window_store("win1", 1000, 10)
    w.put("a", 1, 100)
    s = Stores.in_memory_session_store("sess1", 1000)
    s.put(Windowed("a", 100, 110), 1)
    v = Stores.in_memory_versioned_store("ver1", 1000)
    v.put("a", 1, 100)
    return {"kv": kv, "w": w, "s": s, "v": v}


def state(stores: dict[str, Any]) -> tuple:
    return (list(stores["kv"].all()), list(stores["w"].all()), stores["w"].observed_stream_time,
            list(stores["s"].all()), stores["s"].observed_stream_time,
            stores["v"].versions("a"), stores["v"].observed_stream_time)


BAD_CALLS: list[tuple[str, Callable[[dict[str, Any]], Any], type, tuple[str, ...]]] = [
    ("kv put None key", lambda st: st["kv"].put(None, 1), ValueError, ("kv1", "key")),
    ("kv get None key", lambda st: st["kv"].get(None), ValueError, ("kv1", "key")),
    ("kv put unhashable", lambda st: st["kv"].put(["x"], 1), TypeError, ("kv1", "key")),
    ("kv put incomparable", lambda st: st["kv"].put(5, 1), TypeError, ("kv1", "key")),
    ("window None key", lambda st: st["w"].put(None, 1, 5000), ValueError, ("win1", "key")),
    ("window str start", lambda st: st["w"].put("a", 1, "5000"), TypeError, ("win1", "window_start")),
    ("window float start", lambda st: st["w"].put("a", 1, 5000.0), TypeError, ("win1", "window_start")),
    ("window bool start", lambda st: st["w"].put("a", 1, True), TypeError, ("win1", "window_start")),
    ("window incomparable key", lambda st: [st["w"].put(k, 1, 100) for k in range(40)], TypeError, ("win1",)),
    ("window incomparable key, new window", lambda st: st["w"].put(7, 1, 200), TypeError, ("win1", "key 7")),
    ("window str then bytes key", lambda st: st["w"].put(b"a", 1, 100), TypeError, ("win1", "key b'a'")),
    ("window unhashable key", lambda st: st["w"].put({"x": 1}, 1, 5000), TypeError, ("win1", "key")),
    ("window fetch bad bound", lambda st: st["w"].fetch("a", "0", 10), TypeError, ("win1", "time_from")),
    ("session not windowed", lambda st: st["s"].put(("a", 1, 2), 1), TypeError, ("sess1", "session")),
    ("session None key", lambda st: st["s"].put(Windowed(None, 1, 5000), 1), ValueError, ("sess1", "key")),
    ("session float end", lambda st: st["s"].put(Windowed("a", 1, 5000.5), 1), TypeError, ("sess1", "end")),
    ("session start > end", lambda st: st["s"].put(Windowed("a", 5000, 1), 1), ValueError, ("sess1", "start")),
    ("session incomparable", lambda st: st["s"].put(Windowed(7, 5000, 5000), 1), TypeError, ("sess1", "key")),
    ("session find None key", lambda st: st["s"].find_sessions(None, 0, 1), ValueError, ("sess1", "key")),
    ("versioned None key", lambda st: st["v"].put(None, 1, 5000), ValueError, ("ver1", "key")),
    ("versioned str ts", lambda st: st["v"].put("a", 1, "5000"), TypeError, ("ver1", "timestamp")),
    ("versioned bad as_of", lambda st: st["v"].get("a", 1.5), TypeError, ("ver1", "as_of")),
    ("versioned incomparable key", lambda st: st["v"].put(5, 1, 200), TypeError, ("ver1", "key 5")),
    ("session fetch_session str end", lambda st: st["s"].fetch_session("a", 100, "110"), TypeError, ("sess1", "end")),
    ("versioned unhashable", lambda st: st["v"].put([1], 1, 5000), TypeError, ("ver1", "key")),
    ("versioned delete None", lambda st: st["v"].delete(None, 5000), ValueError, ("ver1", "key")),
]


@pytest.mark.parametrize("label, call, exc, words", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises_and_keeps_state(label: str, call: Callable, exc: type, words: tuple) -> None:
    stores = filled()
    before = state(stores)
    with pytest.raises(exc) as err:
        call(stores)
    for word in words:
        assert word in str(err.value), (label, str(err.value))
    assert state(stores) == before


@pytest.mark.parametrize(
    "factory, arg",
    [
        (lambda: Stores.in_memory_session_store("s", -1), "retention"),
        (lambda: Stores.in_memory_versioned_store("v", -1), "history_retention"),
        (lambda: Stores.in_memory_versioned_store("v", 10, -3), "segment_interval"),
        (lambda: Stores.in_memory_window_store("w", 10, 5, -1), "grace"),
    ],
)
def test_negative_durations(factory: Callable, arg: str) -> None:
    with pytest.raises(ValueError, match=arg):
        factory()


def test_wrong_duration_types() -> None:
    with pytest.raises(TypeError, match="retention of session store 's'"):
        Stores.in_memory_session_store("s", "10")
    with pytest.raises(TypeError, match="window_size"):
        Stores.in_memory_window_store("w", 10, 2.5)
    with pytest.raises(TypeError):
        Stores.in_memory_key_value_store(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Stores.in_memory_session_store("", 10)


def test_changelog_serde_failure_leaves_store_unchanged() -> None:
    store = change_logged(Stores.in_memory_key_value_store("kv"))
    store.put("a", 1)
    with pytest.raises(ValueError, match="changelog 'kv-changelog' of key-value store 'kv'"):
        store.put("b", object())
    assert list(store.all()) == [("a", 1)]
    assert [r.key for r in store.drain()] == [b'"a"']
    with pytest.raises(ValueError, match="key"):
        store.put(None, 1)
    w = change_logged(Stores.in_memory_window_store("w", 100, 10))
    with pytest.raises(TypeError, match="window_start"):
        w.put("a", 1, "3")
    assert w.pending_changelog_records == 0
