"""A delivery timeout fails the task: it is closed, rewound to its committed offset, restored and
recreated; nothing is lost (real broker; the timeout is forced by a producer linger far above it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_daemon_error_policies import BASE, topology
from tests.support.daemon import committed_offsets, read_topic, running_app, wait_until
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


async def test_delivery_timeout_restarts_the_task(kafka_bootstrap: str, topic_factory: Any) -> None:
    source = await topic_factory(1, prefix="in")
    sink = unique_name("out")
    group = unique_name("timeout")
    await produce(kafka_bootstrap, source, [Out(f"k{i}".encode(), json.dumps({"n": 100 + i}).encode(), BASE + i)
                                            for i in range(100)])
    # every producer batch lingers 400 ms, the delivery timeout is 50 ms: the first delayed ack expires
    async with running_app(topology(source, sink), kafka_bootstrap, group, wait_tasks=1,
                           delivery_timeout_ms=50, producer_config={"linger_ms": 400}) as app:
        await wait_until(lambda: app.metrics.value("streamproc_task_failures_total", reason="TaskFailedError") >= 1,
                         30, "a delivery timeout")
        app.acks.tracker.delivery_timeout_ms = 60_000  # let the restarted task finish
        await wait_until(lambda: len(app.tasks.running()) == 1 and
                         sum(app.committer.committed.values()) == 100, 60, "the restarted task to commit all")
        got = await read_topic(kafka_bootstrap, sink, 100, timeout=30, idle=1.0)
    assert sorted({json.loads(r.value)["n"] for r in got}) == list(range(100, 200))  # nothing lost
    assert await committed_offsets(kafka_bootstrap, group, source, 1) == {0: 100}
