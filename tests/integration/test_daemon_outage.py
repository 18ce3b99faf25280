"""The daemon and a broker that goes away (its own single broker, killed with kill -9 and restarted).

* SIGTERM while the broker is down, under both guarantees: the daemon stops within
  ``shutdown_timeout_ms`` with exit status 0, no traceback, the producer closed; the uncommitted
  input is processed again at the next start (checked: a second run after the broker is back
  reflects every input in the output).
* A 60 s outage under exactly-once (the fault harness, broker as the target): nothing lost, nothing
  duplicated, the output equals the TopologyTestDriver's; the client library's log lines stay few.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_daemon_sigterm import TOPOLOGY_MODULE, start
from tests.support.daemon import committed_offsets, exit_code, recent_base_ts, unreflected
from tests.support.durability import harness
from tests.support.kafka import (
    Out,
    create_topic,
    end_offsets,
    localkafka,
    produce,
    start_or_fail,
    unique_name,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(420)]

PARTITIONS = 2
SHUTDOWN_MS = 8_000


@pytest.fixture(scope="module")
def own_broker() -> Iterator[Any]:
    """A broker of this module's own: the tests stop and restart it."""
    handle = start_or_fail("a broker for the outage tests", lambda: localkafka.start_single(timeout=180))
    try:
        yield handle
    finally:
        handle.stop(grace=5.0)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_sigterm_while_the_broker_is_down(own_broker: Any, tmp_path: Path, guarantee: str) -> None:
    bootstrap = own_broker.bootstrap
    (tmp_path / "sigterm_topology.py").write_text(TOPOLOGY_MODULE)
    source = unique_name("clicks")
    await create_topic(bootstrap, source, PARTITIONS, 1)
    sink, group = unique_name("out"), unique_name("outage")
    base = recent_base_ts(80_000_000)
    data = [(f"u{i % 500:03d}", base + i * 1_000) for i in range(80_000)]
    half = len(data) // 2
    await produce(bootstrap, source, [Out(u.encode(), b'{"page": "/"}', ts) for u, ts in data[:half]])

    log = tmp_path / "first.log"
    proc = start(tmp_path, bootstrap, group, source, sink, log, processing_guarantee=guarantee,
                 shutdown_timeout_ms=SHUTDOWN_MS)
    try:
        for _ in range(600):  # until it has committed some input: it is in the middle of the backlog
            if 0 < sum((await committed_offsets(bootstrap, group, source, PARTITIONS)).values()):
                break
            assert proc.poll() is None, log.read_text()[-3000:]
            await asyncio.sleep(0.1)
        own_broker.kill(0)
        await asyncio.sleep(4)
        assert proc.poll() is None, "the daemon must ride out the outage until told to stop"
        proc.send_signal(signal.SIGTERM)
        rc = await exit_code(proc, log, SHUTDOWN_MS / 1000 + 2)  # within shutdown_timeout_ms (+ process exit)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not own_broker.alive(0):
            await asyncio.to_thread(own_broker.restart, 0)
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text and "CancelledError" not in text, text[-3000:]
    assert "received SIGTERM" in text and re.search(r"\bstopped\b", text)
    assert len(re.findall(r"aiokafka", text)) < 60, "the client library's lines are rate-limited"

    committed = sum((await committed_offsets(bootstrap, group, source, PARTITIONS)).values())
    assert committed < half, "the broker went away in the middle of the backlog"
    # the broker is back: a second run processes what the first could not commit, and the rest
    await produce(bootstrap, source, [Out(u.encode(), b'{"page": "/"}', ts) for u, ts in data[half:]])
    log2 = tmp_path / "second.log"
    proc = start(tmp_path, bootstrap, group, source, sink, log2, processing_guarantee=guarantee)
    try:
        want = await end_offsets(bootstrap, source)
        for _ in range(1200):
            if await committed_offsets(bootstrap, group, source, PARTITIONS) == want:
                break
            await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rc = await exit_code(proc, log2, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, log2.read_text()[-3000:]
    isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
    assert unreflected(data, await harness().read_all(bootstrap, sink, isolation, timeout=120)) == []


async def test_exactly_once_survives_a_60_s_outage(own_broker: Any, tmp_path: Path) -> None:
    h = harness()
    cfg = h.FaultConfig(records=20_000, kills=1, guarantee="exactly_once_v2", seed=23, target="broker",
                        broker_down_s=60.0, min_kill_s=2.0, max_kill_s=3.0, produce_rate=3_000.0, workdir=tmp_path)
    report = await h.run_fault_test(own_broker.bootstrap, cfg, cluster=own_broker)
    print(report.summary())
    assert report.final_exit_code == 0, report.summary()
    assert report.lost_inputs == {"clicks": 0, "payments": 0}, report.summary()
    assert report.duplicates == {"sessions": 0, "payments": 0}, report.summary()
    assert report.missing == {"sessions": 0, "payments": 0}, report.summary()
    assert report.unexpected == {"sessions": 0, "payments": 0}, report.summary()
    assert report.ok, report.summary()
    lines = sum(len(re.findall(r"aiokafka", p.read_text(errors="replace"))) for p in tmp_path.glob("run-*.log"))
    assert lines < 200, f"{lines} client library lines in the daemon's log over a 60 s outage"
