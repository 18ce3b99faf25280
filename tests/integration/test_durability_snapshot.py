"""Local snapshots on a real broker: a clean stop writes one snapshot per changelog partition at the
changelog's end offset; a restart loads it and replays only the changelog's tail; a snapshot whose
offset is beyond the changelog's end, or below its log-start offset, is rejected with a warning and
the state is rebuilt from the changelog alone."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import marshal
import zlib
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streamproc.engine.task import TaskId
from streamproc.records import Windowed
from streamproc.runtime.snapshot import read_snapshot, write_snapshot
from streamproc.stores.changelog_format import session_changelog_key
from tests.support.daemon import committed_offsets, running_app
from tests.support.durability import recent_click_stream, restored_task, store_contents
from tests.support.kafka import Out, end_offsets, kafka_admin, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

PARTITIONS = 2
RECORDS = 6_000


async def first_run(kafka_bootstrap: str, topic_factory: Any, state_dir: Path) -> tuple[Any, str, str]:
    """Process RECORDS clicks and stop cleanly (which writes the snapshots)."""
    from topologies import sessions

    clicks = await topic_factory(PARTITIONS, prefix="clicks")
    build = partial(sessions.build, input=clicks, output=unique_name("session-stats"))
    data = recent_click_stream(RECORDS)
    await produce(kafka_bootstrap, clicks, (Out(k.encode(), json.dumps(v).encode(), ts) for k, v, ts in data))
    app_id = unique_name("snap")
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS, state_dir=str(state_dir)) as app:
        ends = await end_offsets(kafka_bootstrap, clicks)
        for _ in range(600):
            if await committed_offsets(kafka_bootstrap, app_id, clicks, PARTITIONS) == ends:
                break
            await asyncio.sleep(0.1)
    assert app.snapshots is not None and len(app.snapshots.saved) == 2 * PARTITIONS  # sessions + progress
    return build, app_id, clicks


def changelog(app_id: str) -> str:
    from topologies import sessions

    return f"{app_id}-{sessions.STORE}-changelog"


def tamper(path: Path, offset: int | None = None, sentinel: bool = True) -> Windowed:
    """Rewrite a session-store snapshot: another offset and one extra session for user 'sentinel'."""
    header, records = read_snapshot(path)
    t = header.observed_stream_time
    window = Windowed("sentinel", t, t)
    if sentinel:
        records.append((session_changelog_key(b"sentinel", t, t), (1).to_bytes(8, "big"), t))
    payload = marshal.dumps(records)
    write_snapshot(path, dataclasses.replace(header, offset=header.offset if offset is None else offset,
                                             records=len(records), crc32=zlib.crc32(payload)), payload)
    return window


def session_store(app: Any, partition: int) -> Any:
    from topologies import sessions

    mt = app.tasks.get(TaskId(0, partition))
    assert mt is not None
    return mt.task.stores[sessions.STORE]


async def test_snapshot_is_loaded_and_only_the_tail_replayed(kafka_bootstrap: str, topic_factory: Any,
                                                            tmp_path: Path) -> None:
    build, app_id, _ = await first_run(kafka_bootstrap, topic_factory, tmp_path)
    ends = await end_offsets(kafka_bootstrap, changelog(app_id))
    snap0 = tmp_path / app_id / "snapshots" / f"{changelog(app_id)}-0.snapshot"
    assert read_snapshot(snap0)[0].offset == ends[0] > 0
    window = tamper(snap0)  # the extra session shows that the state came from the snapshot
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS, state_dir=str(tmp_path)) as app:
        assert app.snapshots is not None and app.snapshots.rejected == {}
        assert session_store(app, 0).fetch_session("sentinel", window.start, window.end) == 1
        assert app.metrics.value("streamproc_restored_records_total", topic=changelog(app_id)) == 0
        for p in range(PARTITIONS):  # the rest equals what the changelog holds
            expected = await restored_task(build(), app_id, kafka_bootstrap, 0, p)
            got = store_contents(session_store(app, p))
            if p == 0:
                got = ([kv for kv in got[0] if kv[0].key != "sentinel"], got[1])
            assert got == store_contents(expected.stores["session-clicks"])
            expected.close()


@pytest.mark.parametrize("where", ["beyond-end", "below-start"])
async def test_snapshot_outside_the_log_is_rejected_and_state_rebuilt(
        kafka_bootstrap: str, topic_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        where: str) -> None:
    from aiokafka import TopicPartition
    from aiokafka.admin import RecordsToDelete

    build, app_id, _ = await first_run(kafka_bootstrap, topic_factory, tmp_path)
    topic = changelog(app_id)
    ends = await end_offsets(kafka_bootstrap, topic)
    snaps = {p: tmp_path / app_id / "snapshots" / f"{topic}-{p}.snapshot" for p in range(PARTITIONS)}
    if where == "beyond-end":  # as after the changelog topic was recreated, or truncated
        windows = {p: tamper(path, offset=ends[p] + 1_000) for p, path in snaps.items()}
        why = "beyond the changelog's end offset"
    else:  # retention deleted records after the snapshot's offset
        cut = {p: ends[p] // 2 for p in range(PARTITIONS)}
        async with kafka_admin(kafka_bootstrap) as admin:
            await admin.delete_records({TopicPartition(topic, p): RecordsToDelete(c) for p, c in cut.items()},
                                       timeout_ms=30_000)
        windows = {p: tamper(path, offset=cut[p] - 1) for p, path in snaps.items()}
        why = "below the changelog's log-start offset"
    with caplog.at_level(logging.WARNING, logger="streamproc.snapshot"):
        async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS,
                               state_dir=str(tmp_path)) as app:
            assert app.snapshots is not None
            rejected = {tp.partition: msg for tp, msg in app.snapshots.rejected.items() if tp.topic == topic}
            assert set(rejected) == set(range(PARTITIONS)) and all(why in m for m in rejected.values()), rejected
            for p in range(PARTITIONS):
                store = session_store(app, p)
                w = windows[p]
                assert store.fetch_session("sentinel", w.start, w.end) is None  # the snapshot was not used
                expected = await restored_task(build(), app_id, kafka_bootstrap, 0, p)
                assert store_contents(store) == store_contents(expected.stores["session-clicks"])
                assert len(store) > 0
                expected.close()
    assert why in caplog.text and "full restore" in caplog.text
