"""The real CLI as a subprocess: SIGTERM mid-stream (graceful: exit 0 after the final commit), then a
restart from the committed offsets with restored state: every input is reflected in the output."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import (
    committed_offsets,
    exit_code,
    read_to_end,
    recent_base_ts,
    streamproc_command,
    unreflected,
)
from tests.support.kafka import Out, end_offsets, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4
CHUNK = 2_000
CHUNKS = 10

TOPOLOGY_MODULE = '''
import os
from streamproc.dsl import EmitStrategy
from topologies import sessions



def build():
    return sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=os.environ["SIGTERM_TEST_INPUT"],
                          output=os.environ["SIGTERM_TEST_OUTPUT"])
'''


def start(tmp_path: Path, bootstrap: str, group: str, source: str, sink: str, log: Path,
          **settings: Any) -> subprocess.Popen[bytes]:
    """``streamproc run`` of the test topology; ``settings`` become ``--flag=value`` options."""
    env = {**os.environ, "SIGTERM_TEST_INPUT": source, "SIGTERM_TEST_OUTPUT": sink,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
           "STREAMPROC_COMMIT_INTERVAL_MS": "300"}
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in settings.items()]
    return subprocess.Popen(
        [*streamproc_command(), "run", "sigterm_topology", f"--bootstrap-servers={bootstrap}", f"--application-id={group}",
         "--max-poll-records", "200", "--log-level", "info", *flags],
        env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))


async def test_sigterm_then_restart_reflects_every_input(kafka_bootstrap: str, topic_factory: Any,
                                                         tmp_path: Path) -> None:
    (tmp_path / "sigterm_topology.py").write_text(TOPOLOGY_MODULE)
    source = await topic_factory(PARTITIONS, prefix="clicks")
    sink = unique_name("sessions-out")
    group = unique_name("sigterm")
    users = [f"u{i:03d}" for i in range(200)]
    base = recent_base_ts(CHUNK * CHUNKS * 2_000)
    data = [(users[(i * 7919) % len(users)], base + i * 2_000) for i in range(CHUNK * CHUNKS)]

    async def produce_chunk(k: int) -> None:
        part = data[k * CHUNK:(k + 1) * CHUNK]
        await produce(kafka_bootstrap, source, [Out(u.encode(), b'{"page": "/"}', ts) for u, ts in part])

    first_log = tmp_path / "first.log"
    proc = start(tmp_path, kafka_bootstrap, group, source, sink, first_log)
    try:
        k = 0
        while k < CHUNKS // 2:  # keep input flowing while the first run works
            await produce_chunk(k)
            k += 1
        for _ in range(600):  # until the first run produced some output
            try:
                if sum((await end_offsets(kafka_bootstrap, sink)).values()) >= CHUNK:
                    break
            except ValueError:  # the daemon has not created the output topic yet
                pass
            await asyncio.sleep(0.1)
        producing = asyncio.ensure_future(produce_chunk(k))
        proc.send_signal(signal.SIGTERM)  # mid-stream: input is still arriving
        rc = await exit_code(proc, first_log, 60)
        await producing
        k += 1
    finally:
        if proc.poll() is None:
            proc.kill()
    first = first_log.read_text()
    assert rc == 0, first[-3000:]
    assert "received SIGTERM" in first and "stopped" in first
    committed_mid = await committed_offsets(kafka_bootstrap, group, source, PARTITIONS)
    assert sum(committed_mid.values()) > 0
    assert sum(committed_mid.values()) < CHUNK * k, "the first run should have stopped mid-stream"
    while k < CHUNKS:
        await produce_chunk(k)
        k += 1

    second_log = tmp_path / "second.log"
    proc = start(tmp_path, kafka_bootstrap, group, source, sink, second_log)
    try:
        want = await end_offsets(kafka_bootstrap, source)
        for _ in range(1200):
            if await committed_offsets(kafka_bootstrap, group, source, PARTITIONS) == want:
                break
            await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rc = await exit_code(proc, second_log, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    second = second_log.read_text()
    assert rc == 0, second[-3000:]
    restored = [int(n) for n in re.findall(r"restored (\d+) changelog records", second)]
    assert sum(restored) > 0, "the restart should rebuild its stores from the changelog"
    assert await committed_offsets(kafka_bootstrap, group, source, PARTITIONS) == want
    outputs = await read_to_end(kafka_bootstrap, sink)
    assert unreflected(data, outputs) == []  # at-least-once: every input is in the output
    assert all(json.loads(r.value)["clicks"] >= 1 for r in outputs)


async def test_a_missing_source_topic_exits_2_with_one_line(kafka_bootstrap: str, tmp_path: Path) -> None:
    """A source topic that does not exist is a usage error: status 2 and one line naming the topic and
    the cluster, no traceback."""
    (tmp_path / "sigterm_topology.py").write_text(TOPOLOGY_MODULE)
    missing = unique_name("no-such-topic")
    log = tmp_path / "fatal.log"
    proc = start(tmp_path, kafka_bootstrap, unique_name("fatal"), missing, unique_name("out"), log)
    try:
        rc = await exit_code(proc, log, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 2, text[-3000:]
    assert re.search(rf"streamproc run: error: source topic\(s\) '{missing}' of sub-topology 0 do not exist; "
                     rf"create them first .*\(cluster at {re.escape(kafka_bootstrap)}\)", text), text[-3000:]
    assert "Traceback" not in text and " ERROR " not in text
