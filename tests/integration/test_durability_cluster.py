"""On the 3-broker cluster (``default.replication.factor=3``, ``min.insync.replicas=2``, as in
production):

* the daemon creates its own topics with exactly the replication asked (``--replication-factor 3``,
  or -1: the cluster's default) and ``--topic-config min.insync.replicas=2``: started while one
  broker is down it creates nothing (a short ``topic_creation_timeout_ms`` gives up with exit 1 and
  the message; a SIGTERM while waiting exits 0), and once the broker is back it creates them all
  with 3 replicas and runs; output exact;
* kill -9 one broker in the middle of a run and restart it 7 s later (the cluster notices after
  3 s); the daemon keeps processing and nothing is lost (and under exactly-once nothing is
  duplicated either).

Every topic the daemon created is then described through the admin API: 3 replicas per partition,
``min.insync.replicas=2`` set on the topic (not inherited from the broker), changelogs with their
store's cleanup policy."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import exit_code
from tests.support.durability import harness
from tests.support.kafka import Out, create_topic, kafka_admin, produce, topic_partitions, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4
#: DescribeConfigs config_source of a config set on the topic itself
_TOPIC_SOURCE = 1

WORDCOUNT_MODULE = '''
import os
from topologies import wordcount


def build():
    return wordcount.build(input=os.environ["RF_TEST_INPUT"], output=os.environ["RF_TEST_OUTPUT"])
'''


async def topic_level_configs(bootstrap: str, topics: list[str]) -> dict[str, dict[str, str]]:
    """``{topic: {config: value}}`` of the configs set on each topic itself (DescribeConfigs
    ``config_source`` DYNAMIC_TOPIC_CONFIG), so a broker default does not count."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async with kafka_admin(bootstrap) as admin:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for res in response.to_object()["resources"]:
            assert res["error_code"] == 0, res
            out[res["resource_name"]] = {e["config_names"]: e["config_value"] for e in res["config_entries"]
                                         if e["config_source"] == _TOPIC_SOURCE}
    return out


async def daemon_topics(topology: Any, app_id: str, outputs: list[str]) -> dict[str, dict[str, str]]:
    """Every topic the daemon creates for ``topology`` -> the configs it must have on the cluster."""
    from streamproc.engine.task import Task
    from streamproc.stores import changelog_topic_config

    want = {t: {"min.insync.replicas": "2"} for t in outputs}
    for st in topology.subtopologies_for(app_id):
        for t in st.repartition_topics:
            want[t] = {"min.insync.replicas": "2", "cleanup.policy": "delete", "retention.ms": "-1"}
        task = Task(topology, st.id, 0, app_id)
        for name, t in task.changelog_topics.items():
            want[t] = {"min.insync.replicas": "2", **changelog_topic_config(task.stores[name])}
        task.close()
    return want


async def check_created_topics(bootstrap: str, want: dict[str, dict[str, str]]) -> None:
    """3 replicas on every partition and the wanted configs set on the topic."""
    configs = await topic_level_configs(bootstrap, sorted(want))
    for topic, needed in want.items():
        parts = await topic_partitions(bootstrap, topic)
        assert parts and all(len(p["replicas"]) == 3 for p in parts.values()), (topic, parts)
        assert {k: configs[topic].get(k) for k in needed} == needed, (topic, configs[topic])


async def alive_brokers(bootstrap: str) -> int:
    """Brokers the cluster lists (-1 when the request went to the broker just killed)."""
    try:
        async with kafka_admin(bootstrap) as admin:
            return len((await admin.describe_cluster())["brokers"])
    except Exception:  # noqa: BLE001 - asked again
        return -1


def run_cli(tmp_path: Path, bootstrap: str, app: str, source: str, sink: str, name: str,
            *flags: str) -> tuple[subprocess.Popen[bytes], Path]:
    script = Path(sys.executable).parent / "streamproc"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "streamproc.cli"]
    env = {**os.environ, "RF_TEST_INPUT": source, "RF_TEST_OUTPUT": sink,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    log = tmp_path / f"{name}.log"
    proc = subprocess.Popen(
        [*cmd, "run", "rf_test_topology", f"--bootstrap-servers={bootstrap}", f"--application-id={app}",
         "--commit-interval-ms=200", "--loop=asyncio", *flags],
        env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)
    return proc, log


async def wait_log(proc: subprocess.Popen[bytes], log: Path, pattern: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not re.search(pattern, log.read_text(errors="replace")):
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not logged after {timeout} s:\n{log.read_text()}")
        await asyncio.sleep(0.1)


async def test_topics_created_with_the_asked_replication_once_a_down_broker_returns(
        kafka_cluster: Any, tmp_path: Path) -> None:
    from streamproc.testing import TopologyTestDriver
    from topologies import wordcount

    h = harness()
    bootstrap = kafka_cluster.bootstrap
    (tmp_path / "rf_test_topology.py").write_text(WORDCOUNT_MODULE)
    source = await create_topic(bootstrap, unique_name("sentences"), PARTITIONS, 3)
    base = int(time.time() * 1000) - 600_000
    sentences = [(f"s{i}", " ".join(f"w{(i * 7 + j * 13) % 23}" for j in range(1 + i % 5)), base + i * 100)
                 for i in range(300)]
    await produce(bootstrap, source, [Out(k.encode(), v.encode(), ts) for k, v, ts in sentences])

    victim = 2
    kafka_cluster.kill(victim)
    deadline = time.monotonic() + 30
    while await alive_brokers(bootstrap) != 2:  # fenced after broker.session.timeout.ms (3 s)
        assert time.monotonic() < deadline, "the killed broker is still listed after 30 s"
        await asyncio.sleep(0.3)

    # the default factor (-1: the cluster's default.replication.factor, 3) with a short bound: gives up
    app1, sink1 = unique_name("rf-default"), unique_name("counts")
    proc, log = run_cli(tmp_path, bootstrap, app1, source, sink1, "gives-up", "--topic-creation-timeout-ms=3000")
    assert await exit_code(proc, log) == 1, log.read_text()
    text = log.read_text()
    factor = r"replication factor 3 \(replication_factor=-1: the cluster's default.replication.factor\)"
    brokers = r"the cluster has 2 broker\(s\) alive: \d \(127.0.0.1:\d+\), \d \(127.0.0.1:\d+\)"
    assert len(re.findall(rf"WARNING .*cannot create topic\(s\) .*'{app1}-words-repartition'.* with {factor}: "
                          rf"{brokers}; waiting up to 3 s", text)) == 1, text
    assert re.search(rf"gave up creating topic\(s\) .*'{sink1}'.* with {factor} after 3 s "
                     rf"\(topic_creation_timeout_ms\): {brokers}; start the missing brokers", text), text

    # a stop while waiting: exit 0, nothing created
    app3, sink3 = unique_name("rf-stop"), unique_name("counts")
    proc, log = run_cli(tmp_path, bootstrap, app3, source, sink3, "stops", "--replication-factor=3")
    await wait_log(proc, log, r"WARNING .*cannot create topic\(s\) ", 60)
    proc.send_signal(signal.SIGTERM)
    assert await exit_code(proc, log, 10) == 0, log.read_text()

    # --replication-factor 3 --topic-config min.insync.replicas=2, exactly-once: waits for the broker
    app2, sink2 = unique_name("rf-three"), unique_name("counts")
    proc, log = run_cli(tmp_path, bootstrap, app2, source, sink2, "waits", "--replication-factor=3",
                        "--topic-config=min.insync.replicas=2", "--processing-guarantee=exactly_once_v2")
    try:
        await wait_log(proc, log, r"WARNING .*cannot create topic\(s\) .* with replication factor 3: ", 60)
        await asyncio.sleep(2.0)  # a few more attempts
        want = await daemon_topics(wordcount.build(input=source, output=sink2), app2, [sink2])
        async with kafka_admin(bootstrap) as admin:
            listed = set(await admin.list_topics())
        assert not listed & set(want), listed & set(want)
        assert not any(t.startswith((app1, app3)) for t in listed) and not {sink1, sink3} & listed
        await asyncio.to_thread(kafka_cluster.restart, victim)
        await wait_log(proc, log, r"task \S+ running", 90)
        repartition = f"{app2}-{wordcount.REPARTITION}-repartition"
        deadline = time.monotonic() + 120
        while sum([await h.unprocessed(bootstrap, app2, t, PARTITIONS) for t in (source, repartition)]):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"not processed in 120 s:\n{log.read_text()}"
            await asyncio.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
    assert await exit_code(proc, log) == 0, log.read_text()
    assert len(re.findall("cannot create topic", log.read_text())) == 1

    with TopologyTestDriver(wordcount.build(input=source, output=sink2), application_id=app2) as driver:
        for k, v, ts in sentences:
            driver.input_topic(source).pipe(k, v, ts)
        expected = Counter((r.key, r.value) for r in driver.output_topic(sink2).read_records())
    got = Counter((r.key.decode(), int(r.value)) for r in await h.read_all(bootstrap, sink2, "read_committed"))
    assert got == expected and sum(expected.values()) > 600
    await check_created_topics(bootstrap, want)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_broker_killed_mid_run(kafka_cluster: Any, tmp_path: Path, guarantee: str) -> None:
    h = harness()
    cfg = h.FaultConfig(records=16_000, kills=1, guarantee=guarantee, seed=21, min_kill_s=4.0, max_kill_s=6.0,
                        target="broker", broker_down_s=7.0, replication=3,
                        topic_configs={"min.insync.replicas": "2"}, workdir=tmp_path)
    report = await h.run_fault_test(kafka_cluster.bootstrap, cfg, cluster=kafka_cluster)
    print(report.summary())
    assert len(report.kills) == 1 and report.final_exit_code == 0
    assert report.kills[0]["committed_while_down"] > 0, report.summary()  # processing went on
    assert report.lost_inputs == {"clicks": 0, "payments": 0}, report.summary()
    if guarantee == "exactly_once_v2":
        assert report.duplicates == {"sessions": 0, "payments": 0}, report.summary()
        assert report.missing == {"sessions": 0, "payments": 0}, report.summary()
        assert report.stores_equal == report.stores_checked > 0, report.summary()
    assert report.ok, report.summary()
    # the daemon created its own topics (the harness creates only the inputs), as asked
    outputs = [report.topics["sessions_out"], report.topics["payments_out"]]
    await check_created_topics(kafka_cluster.bootstrap,
                               await daemon_topics(h.build(report.topics), report.app_id, outputs))
