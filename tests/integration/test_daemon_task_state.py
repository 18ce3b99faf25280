"""State across rebalances on a real broker (issue 23): tasks that stay with an instance do not
restore, tasks given back restore only the changelog tail written meanwhile, a standby makes a
kill -9 fail-over restore almost nothing, and a static member restarted within its session timeout
does not make the others rebalance. In every case no input is lost, and final sessions equal the
TopologyTestDriver's."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from streamproc.dsl import EmitStrategy
from tests.support.daemon import (
    committed_offsets,
    expected_by_partition,
    free_port,
    read_to_end,
    recent_base_ts,
    running_app,
    streamproc_command,
    unreflected,
    wait_until,
)
from tests.support.kafka import Out, end_offsets, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 8
TOPOLOGY_MODULE = '''
import os
from streamproc.dsl import EmitStrategy
from topologies import sessions


def build():
    return sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=os.environ["TASK_STATE_INPUT"],
                          output=os.environ["TASK_STATE_OUTPUT"])
'''


class Clicks:
    """Clicks in event-time order, produced in chunks; remembers what was produced where."""

    def __init__(self, bootstrap: str, topic: str, total: int, seed: int, users: int = 200) -> None:
        rng = random.Random(seed)
        names = [f"u{i:05d}" for i in range(users)]
        base = recent_base_ts(total * 500)
        self.data = [(rng.choice(names), base + i * 500) for i in range(total)]
        self.bootstrap = bootstrap
        self.topic = topic
        self.sent = 0
        self.last_offsets: dict[int, int] = {}

    async def produce(self, n: int) -> None:
        part = self.data[self.sent:self.sent + n]
        self.sent += len(part)
        meta = await produce(self.bootstrap, self.topic,
                             [Out(u.encode(), json.dumps({"page": "/"}).encode(), ts) for u, ts in part])
        for m in meta:
            self.last_offsets[m.partition] = max(self.last_offsets.get(m.partition, -1), m.offset)

    async def all_committed(self, group: str) -> bool:
        offs = await committed_offsets(self.bootstrap, group, self.topic, PARTITIONS)
        return all(offs[p] == last + 1 for p, last in self.last_offsets.items())

    async def wait_committed(self, group: str, timeout: float = 120) -> None:
        for _ in range(int(timeout / 0.2)):
            if await self.all_committed(group):
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"input not all committed within {timeout} s")


async def check_final_sessions(bootstrap: str, clicks: Clicks, source: str, sink: str) -> None:
    """Nothing lost, and the last update of every session equals the driver's."""
    from topologies import sessions

    outputs = await read_to_end(bootstrap, sink)
    assert unreflected(clicks.data[:clicks.sent], outputs) == []
    got: dict[tuple[str, int], Any] = {}
    for r in outputs:
        value = json.loads(r.value) if r.value is not None else None
        if value is not None:
            got[(value["user"], value["start"])] = value
    expected_out = expected_by_partition(
        lambda: sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=source, output=sink),
        [(source, u, {"page": "/"}, ts) for u, ts in clicks.data[:clicks.sent]], sink, PARTITIONS)
    want: dict[tuple[str, int], Any] = {}
    for records in expected_out.values():
        for _, value, _ in records:
            if value is not None:
                want[(value["user"], value["start"])] = value
    # a session merged away keeps its last update in both; compare the sessions alive at the end
    assert {k: v["clicks"] for k, v in got.items() if k in want} == {k: v["clicks"] for k, v in want.items()}


def restored(app: Any) -> float:
    return app.metrics.value("streamproc_restored_records_total")


async def test_tasks_that_stay_do_not_restore_and_returning_ones_restore_only_their_tail(
        kafka_bootstrap: str, topic_factory: Any) -> None:
    from topologies import sessions

    source = await topic_factory(PARTITIONS, prefix="clicks")
    sink = unique_name("sessions-out")
    group = unique_name("keep")
    clicks = Clicks(kafka_bootstrap, source, 24_000, seed=5)

    def app() -> Any:
        return running_app(sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=source, output=sink),
                           kafka_bootstrap, group, wait_tasks=None, commit_interval_ms=200,
                           consumer_config={"heartbeat_interval_ms": 500})

    async with app() as a:
        await wait_until(lambda: len(a.tasks.running()) == PARTITIONS, 60, "the first instance to run 8 tasks")
        await clicks.produce(8_000)
        await clicks.wait_committed(group)
        assert restored(a) == 0
        before = {mt.id for mt in a.tasks.running()}
        async with app() as b:
            await wait_until(lambda: len(a.tasks.running()) == 4 and len(b.tasks.running()) == 4, 90,
                             "the 8 tasks shared 4 and 4")
            kept = {mt.id for mt in a.tasks.running()}
            assert kept < before
            # the tasks that stayed resumed from memory, the moved ones were only suspended
            assert restored(a) == 0, "a task that stayed with its instance restored"
            assert a.metrics.value("streamproc_tasks", state="suspended") == 4
            assert restored(b) > 0  # b had no state: it restored its 4 tasks in full
            await clicks.produce(8_000)
            await clicks.wait_committed(group)
            written_by_b = b.metrics.value("streamproc_changelog_records_total")
            assert written_by_b > 0
        # b left: its tasks return to a, which kept their state; it replays only what b wrote
        await wait_until(lambda: len(a.tasks.running()) == PARTITIONS, 90, "the tasks back on the first instance")
        assert restored(a) == written_by_b
        assert a.metrics.value("streamproc_tasks", state="suspended") == 0
        await clicks.produce(8_000)
        await clicks.wait_committed(group)
    await check_final_sessions(kafka_bootstrap, clicks, source, sink)


def scrape(port: int, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` (with ``labels``) on a daemon's /metrics, 0 if absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


@contextmanager
def daemon(tmp_path: Path, bootstrap: str, group: str, source: str, sink: str, name: str,
           **settings: Any) -> Iterator[subprocess.Popen[bytes]]:
    """``streamproc run`` of the sessions topology as a subprocess (killed at the end if alive)."""
    (tmp_path / "task_state_topology.py").write_text(TOPOLOGY_MODULE)
    env = {**os.environ, "TASK_STATE_INPUT": source, "TASK_STATE_OUTPUT": sink,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    log = (tmp_path / f"{name}.log").open("ab")
    proc = subprocess.Popen([*streamproc_command(), "run", "task_state_topology", f"--bootstrap-servers={bootstrap}",
                             f"--application-id={group}", "--commit-interval-ms=200", "--log-level=info", *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


async def wait_metric(port: int, what: str, cond: Any, timeout: float, name: str, **labels: str) -> float:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            value = await asyncio.to_thread(scrape, port, name, **labels)
            if cond(value):
                return value
        except OSError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.3)


async def test_kill_9_with_a_standby_restores_at_most_5_percent(kafka_bootstrap: str, topic_factory: Any,
                                                                 tmp_path: Path) -> None:
    from topologies import sessions

    source = await topic_factory(PARTITIONS, prefix="clicks")
    sink = unique_name("sessions-out")
    group = unique_name("standby")
    # many users: nearly every click writes its own changelog record, so the changelogs are large
    clicks = Clicks(kafka_bootstrap, source, 40_000, seed=9, users=30_000)
    fast = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
    port = free_port()
    async with running_app(sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=source, output=sink),
                           kafka_bootstrap, group, commit_interval_ms=200, num_standby_replicas=1,
                           consumer_config=fast) as a:
        await wait_until(lambda: len(a.tasks.running()) == PARTITIONS, 60, "the first instance to run 8 tasks")
        with daemon(tmp_path, kafka_bootstrap, group, source, sink, "b", num_standby_replicas=1,
                    metrics_port=port, consumer_config="session_timeout_ms=6000") as b:
            await wait_until(lambda: len(a.tasks.running()) == 4, 90, "the second instance to take 4 tasks")
            await wait_until(lambda: a.metrics.value("streamproc_tasks", state="standby") == 4, 30,
                             "4 standby tasks on the first instance")
            await wait_metric(port, "4 standbys on the second instance", lambda v: v == 4, 30,
                              "streamproc_tasks", state="standby")
            mine = {mt.id.partition for mt in a.tasks.running()}
            for _ in range(6):
                await clicks.produce(5_000)
            await clicks.wait_committed(group)
            await wait_until(lambda: a.metrics.value("streamproc_standby_lag") == 0, 30, "standbys caught up")
            producing = asyncio.ensure_future(clicks.produce(5_000))
            await asyncio.sleep(0.3)
            b.send_signal(signal.SIGKILL)
            b.wait()
            await producing
        taken = [p for p in range(PARTITIONS) if p not in mine]
        taken_size = 0
        for changelog in a.tasks.running()[0].task.changelog_topics.values():
            ends = await end_offsets(kafka_bootstrap, changelog)
            taken_size += sum(ends[p] for p in taken)
        assert taken_size > 8_000
        before = restored(a)
        assert before == 0
        await wait_until(lambda: len(a.tasks.running()) == PARTITIONS, 90, "the survivor to run all 8 tasks")
        took = restored(a)
        print(f"kill -9 fail-over: restored {took:.0f} of {taken_size} changelog records "
              f"({100 * took / taken_size:.2f}%)")
        assert took <= 0.05 * taken_size
        await clicks.produce(5_000)
        await clicks.wait_committed(group)
    outputs = await read_to_end(kafka_bootstrap, sink)
    assert unreflected(clicks.data[:clicks.sent], outputs) == []


async def test_a_static_member_restarted_in_time_causes_no_rebalance(kafka_bootstrap: str, topic_factory: Any,
                                                                     tmp_path: Path) -> None:
    from topologies import sessions

    source = await topic_factory(PARTITIONS, prefix="clicks")
    sink = unique_name("sessions-out")
    group = unique_name("static")
    clicks = Clicks(kafka_bootstrap, source, 12_000, seed=13)
    slow = "session_timeout_ms=45000"
    port = free_port()
    async with running_app(sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=source, output=sink),
                           kafka_bootstrap, group, commit_interval_ms=200, group_instance_id="static-a",
                           consumer_config={"session_timeout_ms": 45000, "heartbeat_interval_ms": 1000}) as a:
        await wait_until(lambda: len(a.tasks.running()) == PARTITIONS, 60, "the first instance to run 8 tasks")
        with daemon(tmp_path, kafka_bootstrap, group, source, sink, "b1", group_instance_id="static-b",
                    metrics_port=port, consumer_config=slow) as b:
            await wait_until(lambda: len(a.tasks.running()) == 4, 90, "the second instance to take 4 tasks")
            await clicks.produce(4_000)
            await clicks.wait_committed(group)
            rebalances = a.metrics.value("streamproc_rebalances_total")
            kept = sorted(mt.id for mt in a.tasks.running())
            b.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(b.wait, 60) == 0
        await clicks.produce(4_000)
        with daemon(tmp_path, kafka_bootstrap, group, source, sink, "b2", group_instance_id="static-b",
                    metrics_port=port, consumer_config=slow):
            await wait_metric(port, "the restarted instance to run its 4 tasks", lambda v: v == 4, 60,
                              "streamproc_tasks", state="running")
            await clicks.produce(4_000)
            await clicks.wait_committed(group)
            assert a.metrics.value("streamproc_rebalances_total") == rebalances, "the first instance rebalanced"
            assert sorted(mt.id for mt in a.tasks.running()) == kept
    await check_final_sessions(kafka_bootstrap, clicks, source, sink)



async def test_a_member_of_another_protocol_stops_the_daemon_with_a_clear_error(kafka_bootstrap: str,
                                                                              topic_factory: Any) -> None:
    """A member of an older version (Kafka's range strategy only) holds the group: the daemon cannot
    join it and stops, saying why and what to do."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor

    from streamproc.config import Config
    from streamproc.errors import StreamprocError
    from streamproc.runtime.app import StreamApp
    from topologies import sessions

    source = await topic_factory(PARTITIONS, prefix="clicks")
    group = unique_name("mixed")
    old = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False,
                           partition_assignment_strategy=(RangePartitionAssignor,))
    await old.start()
    old.subscribe([source])
    try:
        for _ in range(100):
            await old.getmany(timeout_ms=100)
            if old.assignment():
                break
        assert old.assignment()
        app = StreamApp(sessions.build(input=source, output=unique_name("out")),
                        Config(application_id=group, bootstrap_servers=kafka_bootstrap, loop="asyncio"))
        with pytest.raises(StreamprocError, match="older streamproc version") as err:
            await asyncio.wait_for(app.run(), 60)
        assert group in str(err.value) and "stop them" in str(err.value)
    finally:
        await old.stop()
