"""Changelog topics and restoration on a real broker: the daemon creates every changelog topic with
the configs of docs/semantics.md, "Changelogs and restoration" (read back with the admin client); restoration logs its progress
per partition (offset, end, remaining, rate) and exports it as metrics; a rebalance in the middle of
a restore stops the revoked partitions' restoration and starts the new ones, without a hang or a
crash, and every store ends up with exactly what its changelog holds."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest

from streamproc.engine.task import Task, TaskId
from streamproc.records import Windowed
from streamproc.runtime.restore import Restorer
from tests.support.daemon import running_app, throttle_restore, wait_until
from tests.support.durability import topic_configs
from tests.support.kafka import Out, produce, topic_partitions, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

DAY_MS = 86_400_000


async def test_changelog_topics_have_the_semantics_configs(kafka_bootstrap: str, topic_factory: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies import currency, sessions

    clicks = await topic_factory(3, prefix="clicks")
    rates = await topic_factory(3, prefix="rates")
    payments = await topic_factory(3, prefix="payments")
    monkeypatch.setattr(currency, "RATES", rates)
    monkeypatch.setattr(currency, "PAYMENTS", payments)
    monkeypatch.setattr(currency, "OUTPUT", unique_name("eur"))
    s_id, c_id = unique_name("cfg-s"), unique_name("cfg-c")
    async with running_app(sessions.build(input=clicks, output=unique_name("stats")), kafka_bootstrap, s_id,
                           wait_tasks=3), \
            running_app(currency.build(), kafka_bootstrap, c_id, wait_tasks=6):
        pass
    session_retention = sessions.GAP_MS + sessions.GRACE_MS
    want = {
        # session store: compact,delete with retention.ms = store retention + 24 h
        f"{s_id}-session-clicks-changelog": {"cleanup.policy": "compact,delete",
                                             "retention.ms": str(session_retention + DAY_MS)},
        # emit-on-close progress: a key-value store
        f"{s_id}-session-clicks-progress-changelog": {"cleanup.policy": "compact"},
        # versioned table: compact with min.compaction.lag.ms = history retention + 24 h
        f"{c_id}-rates-changelog": {"cleanup.policy": "compact",
                                    "min.compaction.lag.ms": str(currency.HISTORY_MS + DAY_MS)},
        # the join's grace buffer and its progress: key-value stores
        f"{c_id}-convert-buffer-changelog": {"cleanup.policy": "compact"},
        f"{c_id}-convert-progress-changelog": {"cleanup.policy": "compact"},
    }
    got = await topic_configs(kafka_bootstrap, sorted(want))
    for topic, configs in want.items():
        for key, value in configs.items():
            assert got[topic][key] == value, (topic, key, got[topic].get(key))
        assert len(await topic_partitions(kafka_bootstrap, topic)) == 3, topic


def session_changelog(application_id: str, partition: int, n: int) -> list[Out]:
    """``n`` distinct sessions for one partition, in the exact record format of the session store's
    change-logging wrapper (written through it)."""
    from topologies import sessions

    task = Task(sessions.build(input="in", output="out"), 0, partition, application_id)
    store = task.stores[sessions.STORE]
    base = int(time.time() * 1000) - 3_600_000  # recent: old record times fall out of retention.ms
    for i in range(n):
        start = base + (i % 1000) * 10
        store.put(Windowed(f"u{partition}-{i:06d}", start, start + 5), 1 + i % 7)
    records = store.drain()
    task.close()
    return [Out(r.key, r.value, r.timestamp, partition=partition) for r in records]


async def test_rebalance_during_restore(kafka_bootstrap: str, topic_factory: Any, caplog: pytest.LogCaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second instance joins while the first is restoring 4 large changelog partitions."""
    from streamproc.stores import changelog_topic_config
    from topologies import sessions

    partitions, per_partition = 4, 20_000
    clicks = await topic_factory(partitions, prefix="clicks")
    app_id = unique_name("restore")
    probe = Task(sessions.build(input=clicks, output="x"), 0, 0, app_id)
    config = changelog_topic_config(probe.stores[sessions.STORE])
    probe.close()
    changelog = await topic_factory(partitions, configs=config, name=f"{app_id}-{sessions.STORE}-changelog")
    for p in range(partitions):
        await produce(kafka_bootstrap, changelog, session_changelog(app_id, p, per_partition))

    # Replay is slowed down (an asyncio sleep after each fetch of the restore consumer; both members
    # share this event loop, which must stay free): to 2.5k records/s until the second instance has
    # tasks, so the rebalance surely lands mid-restore however loaded the machine is, then 25k/s.
    second_assigned = False
    throttle_restore(monkeypatch, lambda: 40e-6 if second_assigned else 400e-6)
    build = lambda: sessions.build(input=clicks, output=unique_name("stats"))
    metric = "streamproc_restored_records_total"
    fast_rebalance = {"heartbeat_interval_ms": 300}
    with caplog.at_level(logging.INFO):
        async with running_app(build(), kafka_bootstrap, app_id, restore_log_interval_ms=300,
                               consumer_config=fast_rebalance) as a:
            await wait_until(lambda: a.metrics.value(metric, topic=changelog) > 10_000 and a.restorer.pending > 0,
                             90, "the first instance to be mid-restore")
            async with running_app(build(), kafka_bootstrap, app_id, restore_log_interval_ms=300,
                                   consumer_config=fast_rebalance) as b:
                await wait_until(lambda: len(b.tasks) > 0, 120, "the second instance to get tasks")
                second_assigned = True
                await wait_until(lambda: len(a.tasks.running()) + len(b.tasks.running()) == partitions
                                 and len(a.tasks) + len(b.tasks) == partitions and len(b.tasks) > 0, 120,
                                 "every task running after the rebalance")
                assert a.fatal is None and b.fatal is None
                assert len(a.tasks) > 0 and len(b.tasks) > 0
                for member in (a, b):
                    for mt in member.tasks:
                        assert len(mt.task.stores[sessions.STORE]) == per_partition, mt.id
                        assert member.metrics.value("streamproc_restore_remaining_records", topic=changelog,
                                                    partition=str(mt.id.partition)) == 0
                    assert member.metrics.value("streamproc_tasks", state="restoring") == 0
                restored = a.metrics.value(metric, topic=changelog) + b.metrics.value(metric, topic=changelog)
                # a task revoked mid-restore starts again from the log start; one fully restored
                # before the rebalance is kept and, given back, restores nothing more
                assert restored >= partitions * per_partition
                assert TaskId(0, 0) in set(a.tasks.ids()) | set(b.tasks.ids())
    text = caplog.text
    assert "abandoned (partitions revoked)" in text
    progress = re.findall(r"restoring \S+\[\d\]: offset (\d+), end (\d+), remaining (\d+), rate (\d+) records/s",
                          text)
    assert progress and all(int(o) + int(r) == int(e) for o, e, r, _ in progress)
    assert any(int(rate) > 0 for *_, rate in progress)


async def test_restore_restarted_for_the_same_partitions_starts_from_its_own_offset(
        kafka_bootstrap: str, topic_factory: Any) -> None:
    """A task closed mid-restore and opened again at once (a failed task restarted, or the same
    partitions assigned back by a rebalance) restores its fresh store from the log start, not from
    where the abandoned restore had got to."""
    from aiokafka import TopicPartition

    from streamproc import serde
    from streamproc.runtime.metrics import Metrics
    from streamproc.stores import Stores, change_logged, changelog_topic_config

    def store() -> Any:
        return change_logged(Stores.in_memory_key_value_store("kv"), serde.STRING, serde.INT)

    topic = await topic_factory(1, configs=changelog_topic_config(store()))
    source = store()
    for i in range(3_000):
        source.put(f"k{i:05d}", i)
    await produce(kafka_bootstrap, topic, [Out(r.key, r.value, r.timestamp) for r in source.drain()])
    tp = TopicPartition(topic, 0)
    restorer = Restorer(kafka_bootstrap, unique_name("restore"), Metrics(), max_records=200)
    await restorer.start()
    consumer = restorer._consumer
    assert consumer is not None
    fetch = consumer.getmany

    async def slow_getmany(*args: Any, **kwargs: Any) -> Any:  # 200 records per 50 ms
        batch = await fetch(*args, **kwargs)
        await asyncio.sleep(0.05)
        return batch

    consumer.getmany = slow_getmany  # type: ignore[method-assign]
    try:
        first, second = store(), store()
        restorer.add("0_0", {tp: first}, lambda: None)
        await wait_until(lambda: len(first) >= 400, 30, "the first restore to be under way")
        assert restorer.remove("0_0")
        done = asyncio.Event()
        restorer.add("0_0", {tp: second}, done.set)
        await asyncio.wait_for(done.wait(), 30)
        assert len(second) == 3_000 and second.get("k00000") == 0 and second.get("k02999") == 2_999
        assert len(first) < 3_000  # the abandoned restore stopped
    finally:
        await restorer.stop()
