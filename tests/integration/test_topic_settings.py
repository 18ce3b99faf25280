"""Topic settings on a real broker: the topic config list is the broker's, existing internal topics
that do not fit stop the daemon with exit 2 before any record is processed, ``topic_config`` values
that would change what a changelog needs, unknown keys or values the broker refuses exit 2, and
topics that fit but have fewer replicas than asked only give a WARNING.

The daemon runs as the real CLI (``streamproc run``) in a subprocess: the exit status and the stderr
lines are what a user sees."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamproc.topic_config import TOPIC_CONFIG_NAMES
from tests.support.daemon import committed_offsets, exit_code, read_to_end, recent_base_ts
from tests.support.durability import topic_configs
from tests.support.kafka import Out, create_topic, kafka_admin, produce, topic_partitions, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]

#: one sub-topology, two stores: a key-value count (changelog compact) and a windowed count
#: (changelog compact,delete)
TOPOLOGY_MODULE = '''
import os
from streamproc import serde
from streamproc.dsl import StreamsBuilder, TimeWindows


def build():
    b = StreamsBuilder()
    g = b.stream(os.environ["TOPIC_TEST_INPUT"], key_serde=serde.STRING, value_serde=serde.STRING).group_by_key()
    g.count(name="counts").to_stream().to(os.environ["TOPIC_TEST_OUTPUT"], key_serde=serde.STRING,
                                          value_serde=serde.JSON)
    g.windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000)).count(name="minute-counts")
    return b.build()
'''


def run_cli(tmp_path: Path, bootstrap: str, app: str, source: str, sink: str, name: str,
            *flags: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``streamproc run`` of the test topology; its stderr goes to ``tmp_path/<name>.log``."""
    script = Path(sys.executable).parent / "streamproc"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "streamproc.cli"]
    env = {**os.environ, "TOPIC_TEST_INPUT": source, "TOPIC_TEST_OUTPUT": sink,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    env.pop("STREAMPROC_TOPIC_CONFIG", None)
    log = tmp_path / f"{name}.log"
    proc = subprocess.Popen(
        [*cmd, "run", "topic_test_topology", f"--bootstrap-servers={bootstrap}", f"--application-id={app}",
         "--commit-interval-ms=200", "--loop=asyncio", *flags],
        env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    return proc, log


async def existing(bootstrap: str, names: list[str]) -> list[str]:
    async with kafka_admin(bootstrap) as admin:
        topics = set(await admin.list_topics())
    return [n for n in names if n in topics]


async def test_topic_config_names_are_the_brokers(kafka_bootstrap: str, topic_factory: Any) -> None:
    """The one list ``topic_config`` is validated against equals the topic configs the broker knows."""
    topic = await topic_factory(1)
    described = (await topic_configs(kafka_bootstrap, [topic]))[topic]
    assert set(described) == TOPIC_CONFIG_NAMES


async def test_topics_that_do_not_fit_exit_2_before_any_record(kafka_bootstrap: str, topic_factory: Any,
                                                               tmp_path: Path) -> None:
    (tmp_path / "topic_test_topology.py").write_text(TOPOLOGY_MODULE)
    source = await topic_factory(2, prefix="words")
    sink = unique_name("counts-out")
    base = recent_base_ts(60_000)
    words = [f"w{i % 7}" for i in range(40)]
    await produce(kafka_bootstrap, source, [Out(w.encode(), b"x", base + i * 1000) for i, w in enumerate(words)])

    # 1. existing changelogs: one not compacted, one with fewer partitions than the 2 tasks
    app = unique_name("topics")
    counts_log, minute_log = f"{app}-counts-changelog", f"{app}-minute-counts-changelog"
    await create_topic(kafka_bootstrap, counts_log, 2, configs={"cleanup.policy": "delete"})
    await create_topic(kafka_bootstrap, minute_log, 1, configs={"cleanup.policy": "compact,delete"})
    proc, log = run_cli(tmp_path, kafka_bootstrap, app, source, sink, "misfit")
    assert await exit_code(proc, log) == 2, log.read_text()
    err = log.read_text()
    assert (f"streamproc run: error: changelog topic '{counts_log}' has cleanup.policy=delete but its key-value "
            f"store 'counts' needs cleanup.policy=compact (without compaction the broker deletes state by time or "
            f"size and a restore misses it); change it (kafka-configs.sh --alter --entity-type topics --entity-name "
            f"{counts_log} --add-config cleanup.policy=[compact]) or delete the topic so the daemon creates it (its "
            f"state is lost)\n") in err, err
    assert (f"\nchangelog topic '{minute_log}' has 1 partition(s) but its window store 'minute-counts' has 2 tasks, "
            f"one changelog partition each; add partitions (kafka-topics.sh --alter --topic {minute_log} "
            f"--partitions 2) or delete the topic so the daemon creates it\n") in err, err
    assert "Traceback" not in err and "fatal" not in err, err
    # before any record: nothing created, nothing consumed or committed
    assert await existing(kafka_bootstrap, [sink]) == []
    assert await committed_offsets(kafka_bootstrap, app, source, 2) == {0: -1, 1: -1}

    # 2. a topic_config that would change a changelog's cleanup policy (fresh app: nothing exists)
    other = unique_name("topics")
    proc, log = run_cli(tmp_path, kafka_bootstrap, other, source, sink, "conflict",
                        "--topic-config", "min.insync.replicas=1", "--topic-config", "cleanup.policy=compact")
    assert await exit_code(proc, log) == 2, log.read_text()
    err = log.read_text()
    assert (f"topic_config cleanup.policy=compact cannot apply to changelog topic '{other}-minute-counts-changelog': "
            f"its window store 'minute-counts' needs cleanup.policy=compact,delete (the daemon sets it on the topics "
            f"it creates); remove cleanup.policy from topic_config") in err, err
    assert f"'{other}-counts-changelog'" not in err  # compact is what the key-value store needs: no conflict
    assert await existing(kafka_bootstrap, [sink, f"{other}-counts-changelog"]) == []

    # 3. an unknown topic config key
    proc, log = run_cli(tmp_path, kafka_bootstrap, other, source, sink, "unknown",
                        "--topic-config", "min.insync.replica=2")
    assert await exit_code(proc, log) == 2, log.read_text()
    assert ("topic_config (from flag --topic-config): unknown Kafka topic config 'min.insync.replica'; did you "
            "mean 'min.insync.replicas'?") in log.read_text()

    # 4. a value the broker refuses: checked (validate-only) before anything is created
    proc, log = run_cli(tmp_path, kafka_bootstrap, other, source, sink, "bad-value",
                        "--topic-config", "min.insync.replicas=many")
    assert await exit_code(proc, log) == 2, log.read_text()
    err = log.read_text()
    assert re.search(r"streamproc run: error: the broker refused the configs of \S+ topic '[^']+' \(.*"
                     r"min.insync.replicas=many.*\): Invalid value many for configuration min.insync.replicas.*; "
                     r"check topic_config", err), err
    assert await existing(kafka_bootstrap, [sink, f"{other}-counts-changelog", f"{other}-minute-counts-changelog"]) \
        == []

    # 5. fixed by hand (policy changed, partitions added), output created with 1 replica: the daemon runs,
    # with a WARNING for each topic below the asked replication factor
    from aiokafka.admin import NewPartitions
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async with kafka_admin(kafka_bootstrap) as admin:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, counts_log, {"cleanup.policy": "compact"})])
        await admin.create_partitions({minute_log: NewPartitions(2)})
    await create_topic(kafka_bootstrap, sink, 2)
    while len(await topic_partitions(kafka_bootstrap, minute_log)) < 2:
        await asyncio.sleep(0.1)
    proc, log = run_cli(tmp_path, kafka_bootstrap, app, source, sink, "fixed", "--replication-factor=2")
    try:
        records = await read_to_end_when(kafka_bootstrap, sink, len(words), proc, log)
        assert sorted((r.key.decode(), int(r.value)) for r in records) == sorted(
            (w, n) for w in set(words) for n in range(1, words.count(w) + 1))
    finally:
        proc.send_signal(signal.SIGTERM)
    assert await exit_code(proc, log) == 0, log.read_text()
    warnings = re.findall(r"WARNING .*has replication factor 1, below the 2 asked.*", log.read_text())
    assert sorted(re.search(r"topic '([^']+)'", w).group(1) for w in warnings) == sorted(  # type: ignore[union-attr]
        [counts_log, minute_log, sink]), warnings
    assert (await topic_configs(kafka_bootstrap, [counts_log]))[counts_log]["cleanup.policy"] == "compact"


async def read_to_end_when(bootstrap: str, topic: str, n: int, proc: subprocess.Popen[bytes], log: Path,
                           timeout: float = 60.0) -> list[Any]:
    """Wait until ``topic`` holds ``n`` records (the daemon must stay up), then read them all."""
    from tests.support.kafka import end_offsets

    deadline = time.monotonic() + timeout
    while sum((await end_offsets(bootstrap, topic)).values()) < n:
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {n} records in {topic} after {timeout} s:\n{log.read_text()}")
        await asyncio.sleep(0.2)
    return await read_to_end(bootstrap, topic)
