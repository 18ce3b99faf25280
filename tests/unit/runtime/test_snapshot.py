"""Snapshots: a store saved to a snapshot file and loaded into a fresh store behaves like the
original from then on (every store kind, property-tested); the file is validated (offsets against
the changelog's log-start and end, CRC, owner, age) and a snapshot that does not fit is ignored."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from streamproc import serde
from streamproc.records import Windowed
from streamproc.runtime.snapshot import (
    MAGIC,
    SnapshotError,
    Snapshots,
    StateDirLockedError,
    export_records,
    read_snapshot,
)
from streamproc.stores import Stores, change_logged
from tests.unit.stores.hypothesis_settings import PROPERTY
from tests.unit.stores.test_changelog import run_kv, run_session, run_versioned, run_window
from tests.unit.stores.test_key_value_store import kv_ops
from tests.unit.stores.test_session_store import session_ops
from tests.unit.stores.test_versioned_store import versioned_ops
from tests.unit.stores.test_window_store import window_ops, window_params

TP = TopicPartition("app-s-changelog", 3)
KEYS = ["a", "b", "c", "d", "e"]


def save_and_load(tmp: Path, original: Any, fresh: Any, offset: int = 10, log_start: int = 0,
                  log_end: int = 10) -> tuple[int, Snapshots]:
    snaps = Snapshots(tmp, "app")

    async def go() -> int:
        assert await snaps.save({TP: original}, {TP: offset}) == 1
        return await snaps.load("0_3", TP, fresh, log_start, log_end)

    return asyncio.run(go()), snaps


def run_all(store: Any, ops: list, run: Any) -> None:
    for i, op in enumerate(ops):
        if store.kind != "versioned":
            store.set_record_timestamp(i)
        run(store, op)
    store.drain()


def split(ops: list, at: int) -> tuple[list, list]:
    at = min(at, len(ops))
    return ops[:at], ops[at:]


# -- snapshot + the same later writes == the original ------------------------------------------------
@PROPERTY
@given(kv_ops, st.integers(0, 50))
def test_key_value_snapshot_round_trip(tmp_path_factory: Any, ops: list, at: int) -> None:
    first, rest = split(ops, at)
    original = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    run_all(original, first, run_kv)
    fresh = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    assert save_and_load(tmp_path_factory.mktemp("s"), original, fresh)[0] == 10
    assert list(fresh.all()) == list(original.all())
    run_all(original, rest, run_kv)
    run_all(fresh, rest, run_kv)
    assert list(fresh.all()) == list(original.all())


@PROPERTY
@given(window_params(), window_ops, st.integers(0, 60))
def test_window_snapshot_round_trip(tmp_path_factory: Any, params: tuple, ops: list, at: int) -> None:
    retention, size, grace, dups = params
    first, rest = split(ops, at)
    original = change_logged(Stores.in_memory_window_store("w", retention, size, grace, dups))
    run_all(original, first, run_window)
    fresh = change_logged(Stores.in_memory_window_store("w", retention, size, grace, dups))
    offset, snaps = save_and_load(tmp_path_factory.mktemp("s"), original, fresh)
    if offset == 0:  # rejected: only when replay cannot reach the stream time of an empty store
        assert len(original) == 0 and original.observed_stream_time > -1, snaps.rejected
        return
    assert list(fresh.all()) == list(original.all())
    assert fresh.observed_stream_time == original.observed_stream_time
    run_all(original, rest, run_window)
    run_all(fresh, rest, run_window)
    assert list(fresh.all()) == list(original.all())
    assert fresh.observed_stream_time == original.observed_stream_time


@PROPERTY
@given(st.integers(0, 80), session_ops, st.integers(0, 60))
def test_session_snapshot_round_trip(tmp_path_factory: Any, retention: int, ops: list, at: int) -> None:
    first, rest = split(ops, at)
    original = change_logged(Stores.in_memory_session_store("s", retention), serde.STRING, serde.INT)
    run_all(original, first, run_session)
    fresh = change_logged(Stores.in_memory_session_store("s", retention), serde.STRING, serde.INT)
    offset, snaps = save_and_load(tmp_path_factory.mktemp("s"), original, fresh)
    if offset == 0:
        assert len(original) == 0 and original.observed_stream_time > -1, snaps.rejected
        return
    assert list(fresh.all()) == list(original.all())
    assert fresh.observed_stream_time == original.observed_stream_time
    run_all(original, rest, run_session)
    run_all(fresh, rest, run_session)
    assert list(fresh.all()) == list(original.all())


@PROPERTY
@given(st.integers(0, 60), st.one_of(st.none(), st.integers(1, 40)), versioned_ops, st.integers(0, 80))
def test_versioned_snapshot_round_trip(tmp_path_factory: Any, history: int, interval: int | None, ops: list,
                                       at: int) -> None:
    first, rest = split(ops, at)

    def make() -> Any:
        return change_logged(Stores.in_memory_versioned_store("v", history, interval), serde.STRING, serde.INT)

    original = make()
    run_all(original, first, run_versioned)
    fresh = make()
    assert save_and_load(tmp_path_factory.mktemp("s"), original, fresh)[0] == 10
    assert fresh.observed_stream_time == original.observed_stream_time

    def same() -> None:
        for key in KEYS:
            assert fresh.get(key) == original.get(key)
            for as_of in range(-2, 215):
                assert fresh.get(key, as_of) == original.get(key, as_of), (key, as_of)

    same()
    run_all(original, rest, run_versioned)
    run_all(fresh, rest, run_versioned)
    same()


def test_window_stream_time_is_kept_when_the_newest_window_was_deleted(tmp_path: Path) -> None:
    original = change_logged(Stores.in_memory_window_store("w", 100, 10), serde.STRING, serde.INT)
    original.put("a", 1, 50)
    original.put("b", 2, 90)
    original.put("b", None, 90)  # observed stays 90, contents' newest window is 50
    fresh = change_logged(Stores.in_memory_window_store("w", 100, 10), serde.STRING, serde.INT)
    assert save_and_load(tmp_path, original, fresh)[0] == 10
    assert fresh.observed_stream_time == 90 and list(fresh.all()) == list(original.all())
    assert fresh.put("c", 3, 85) and original.put("c", 3, 85)  # same window rules as the original
    assert fresh.dropped_records == original.dropped_records - 0


def test_export_orders_versioned_records_by_timestamp() -> None:
    v = change_logged(Stores.in_memory_versioned_store("v", 500), serde.STRING, serde.STRING)
    v.put("b", "b100", 100)
    v.put("b", "b900", 900)
    v.put("a", "a1000", 1000)  # b100 stays (valid until 900, inside history) though 100 < 1000 - 500
    records, replay_time = export_records(v)
    assert [r[2] for r in records] == [100, 900, 1000] and replay_time == 1000


# -- validation -------------------------------------------------------------------------------------
def kv_with(n: int) -> Any:
    store = change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)
    for i in range(n):
        store.put(f"k{i}", i)
    store.drain()
    return store


def fresh_kv() -> Any:
    return change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)


@pytest.mark.parametrize("log_start, log_end, why", [
    (0, 5, "beyond the changelog's end offset 5"),
    (11, 20, "below the changelog's log-start offset 11"),
])
def test_offset_outside_the_log_is_rejected(tmp_path: Path, caplog: pytest.LogCaptureFixture, log_start: int,
                                            log_end: int, why: str) -> None:
    fresh = fresh_kv()
    with caplog.at_level(logging.WARNING, "streamproc.snapshot"):
        offset, snaps = save_and_load(tmp_path, kv_with(5), fresh, offset=10, log_start=log_start, log_end=log_end)
    assert offset == log_start and len(fresh) == 0
    assert why in snaps.rejected[TP] and why in caplog.text and "full restore" in caplog.text


@pytest.mark.parametrize("log_start, log_end", [(0, 10), (10, 10), (3, 25)])
def test_offset_inside_the_log_is_used(tmp_path: Path, log_start: int, log_end: int) -> None:
    fresh = fresh_kv()
    offset, _ = save_and_load(tmp_path, kv_with(5), fresh, offset=10, log_start=log_start, log_end=log_end)
    assert offset == 10 and fresh.get("k4") == 4 and len(fresh) == 5


def write_then(tmp_path: Path, mutate: Any) -> tuple[int, Snapshots]:
    snaps = Snapshots(tmp_path, "app")
    asyncio.run(snaps.save({TP: kv_with(3)}, {TP: 10}))
    path = snaps.path_for(TP)
    mutate(path)
    fresh = fresh_kv()
    offset = asyncio.run(Snapshots(tmp_path, "app").load("0_3", TP, fresh, 0, 20))
    return offset, snaps


def test_corrupt_payload_is_rejected(tmp_path: Path) -> None:
    def flip(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))

    assert write_then(tmp_path, flip)[0] == 0


def test_truncated_and_foreign_files_are_rejected(tmp_path: Path) -> None:
    assert write_then(tmp_path, lambda p: p.write_bytes(p.read_bytes()[:40]))[0] == 0
    assert write_then(tmp_path, lambda p: p.write_bytes(b"hello"))[0] == 0


def rewrite_header(path: Path, **changes: Any) -> None:
    data = path.read_bytes()
    nl = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC):nl])
    header.update(changes)
    path.write_bytes(MAGIC + json.dumps(header).encode() + data[nl:])


@pytest.mark.parametrize("changes", [{"application_id": "other"}, {"partition": 4}, {"kind": "session"},
                                     {"store": "other"}, {"format": 99}])
def test_snapshot_of_something_else_is_rejected(tmp_path: Path, changes: dict[str, Any]) -> None:
    assert write_then(tmp_path, lambda p: rewrite_header(p, **changes))[0] == 0


def test_old_snapshot_is_used_only_without_later_records(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 25 * 3_600_000
    assert write_then(tmp_path, lambda p: rewrite_header(p, created_ms=old))[0] == 0  # end 20 > offset 10
    snaps = Snapshots(tmp_path, "app")
    fresh = fresh_kv()
    assert asyncio.run(snaps.load("0_3", TP, fresh, 0, 10)) == 10 and len(fresh) == 3


def test_file_is_replaced_atomically(tmp_path: Path) -> None:
    snaps = Snapshots(tmp_path, "app")
    asyncio.run(snaps.save({TP: kv_with(3)}, {TP: 10}))
    asyncio.run(snaps.save({TP: kv_with(4)}, {TP: 12}))
    header, records = read_snapshot(snaps.path_for(TP))
    assert header.offset == 12 and len(records) == 4
    assert [p.name for p in snaps.dir.iterdir()] == [snaps.path_for(TP).name]  # no temp files left


def test_read_snapshot_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "x.snapshot"
    path.write_bytes(b"nope")
    with pytest.raises(SnapshotError, match="bad magic"):
        read_snapshot(path)


def test_session_snapshot_keeps_the_key_format() -> None:
    s = change_logged(Stores.in_memory_session_store("s", 100), serde.STRING, serde.INT)
    s.put(Windowed("k", 5, 9), 2)
    assert s.drain()[0].key == export_records(s)[0][0][0]


# -- state dir lock and instance id ----------------------------------------------------------------
def test_state_dir_lock_is_exclusive(tmp_path: Path) -> None:
    a = Snapshots(tmp_path, "app")
    a.lock()
    try:
        with pytest.raises(StateDirLockedError, match="in use by another running instance"):
            Snapshots(tmp_path, "app").lock()
        Snapshots(tmp_path, "other-app").lock()  # another application: its own directory
    finally:
        a.unlock()
    b = Snapshots(tmp_path, "app")
    b.lock()
    b.unlock()


def test_instance_id_is_stable(tmp_path: Path) -> None:
    first = Snapshots(tmp_path, "app").instance_id()
    assert first == Snapshots(tmp_path, "app").instance_id()
    assert first != Snapshots(tmp_path, "app2").instance_id()
    assert os.path.exists(tmp_path / "app" / "instance.id")


def test_snapshot_that_fails_to_load_is_set_aside(tmp_path: Path) -> None:
    """Bytes the store's serdes cannot read: loading fails loudly (the store is half loaded) and the
    file is moved away, so the next start restores from the changelog instead of failing again."""
    snaps = Snapshots(tmp_path, "app")
    asyncio.run(snaps.save({TP: kv_with(3)}, {TP: 10}))
    header, records = read_snapshot(snaps.path_for(TP))
    records.append((b'"k9"', b"not an int", 0))
    import dataclasses
    import marshal
    import zlib

    from streamproc.runtime.snapshot import write_snapshot

    payload = marshal.dumps(records)
    write_snapshot(snaps.path_for(TP), dataclasses.replace(header, records=len(records), crc32=zlib.crc32(payload)),
                   payload)
    with pytest.raises(SnapshotError, match="could not be loaded.*next start restores from the changelog"):
        asyncio.run(snaps.load("0_3", TP, fresh_kv(), 0, 20))
    assert not snaps.path_for(TP).exists()
    assert snaps.path_for(TP).with_name(snaps.path_for(TP).name + ".bad").exists()
    assert asyncio.run(snaps.load("0_3", TP, fresh_kv(), 0, 20)) == 0  # no snapshot any more


def test_save_past_its_deadline_writes_nothing(tmp_path: Path) -> None:
    snaps = Snapshots(tmp_path, "app")
    assert asyncio.run(snaps.save({TP: kv_with(3)}, {TP: 10}, deadline=time.monotonic() - 1)) == 0
    assert not snaps.path_for(TP).exists()
    with pytest.raises(SnapshotError, match="out of time"):
        export_records(kv_with(3), deadline=time.monotonic() - 1)
