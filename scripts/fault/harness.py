#!/usr/bin/env python3
"""Fault harness: kill -9 the ``streamproc`` daemon at random points of a long run, restart it, and
check that nothing was lost (and, under exactly-once, nothing duplicated).

::

    python -m scripts.fault.harness                      # 200k records, 5 kills, at_least_once and exactly_once_v2
    python -m scripts.fault.harness --quick              # 30k records, 2 kills
    python -m scripts.fault.harness --guarantee exactly_once_v2 --records 100000 --kills 3 --seed 4
    KAFKA_BOOTSTRAP_SERVERS=host:9092 python -m scripts.fault.harness ...   # an existing broker

One run (:func:`run_fault_test`), against a real broker (a local one is started when
``KAFKA_BOOTSTRAP_SERVERS`` is not set):

1. creates the input topics (``partitions`` each) and produces a versioned ``rates`` table, starts
   the daemon (``streamproc run scripts.fault.fault_topology`` as a subprocess, ``state_dir`` set,
   commits every ``commit_interval_ms``; it creates its own output, repartition and changelog topics
   with ``--replication-factor`` and ``--topic-config`` from the config) and waits until it committed
   the rates (so every payment's join is deterministic);
2. produces clicks and payments at a steady rate in the background, and meanwhile ``kills`` times:
   waits a random time (``min_kill_s``..``max_kill_s``, so kills land during startup, restoration,
   processing and commits alike), sends SIGKILL and starts a new daemon at once;
3. when all input is produced and processed (nothing left after the committed offsets of every
   source and repartition topic), stops the daemon with SIGTERM (it must exit 0);
4. checks against the TopologyTestDriver fed the same input (one driver per partition):

   - **no input lost**: every click lies inside an emitted session of its user (or was late in the
     driver too), every payment appears in the output;
   - **exactly-once** (``exactly_once_v2``; outputs read ``read_committed``): the session output of
     each partition equals the driver's, in order, and the payment output equals the driver's as a
     multiset: no record missing, none duplicated;
   - **at-least-once**: duplicates are allowed and counted;
   - **final state**: every store of every task, rebuilt from its changelog (read_committed),
     equals the driver's store (the join buffer compared without its arrival numbers). Under
     at-least-once, records processed again after a kill may count twice in the state; differing
     stores are counted and reported, not failed.

The report (a :class:`FaultReport`) gives the kills, inputs, outputs, duplicates and state checks.
The test ``tests/integration/test_durability_faults.py`` runs a short version of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scripts.fault import fault_topology
from scripts.kafka import localkafka

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY_MODULE = fault_topology.__name__

CURRENCIES = [f"C{i:02d}" for i in range(40)]


# ------------------------------------------------------------------------------------------------
# Configuration and report


@dataclass
class FaultConfig:
    records: int = 200_000
    kills: int = 5
    guarantee: str = "at_least_once"
    partitions: int = 4
    seed: int = 1
    min_kill_s: float = 2.0
    max_kill_s: float = 9.0
    commit_interval_ms: int = 200
    produce_rate: float = 0.0  # records/s; 0 = spread the input over the kill phase
    #: "daemon": kill -9 the daemon and restart it; "broker": kill -9 a broker of ``cluster`` (a
    #: localkafka handle), keep it down ``broker_down_s``, restart it
    target: str = "daemon"
    broker_down_s: float = 6.0
    #: replication factor of the input topics, and of the topics the daemon creates itself (its
    #: outputs, repartition and changelog topics: ``--replication-factor``)
    replication: int = 1
    #: configs of the input topics, and ``--topic-config`` of the daemon for the topics it creates
    topic_configs: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    verbose: bool = False


@dataclass
class FaultReport:
    guarantee: str
    records: int
    #: the daemon's application id and the topic names of the run (``clicks``, ``sessions_out``, ...)
    app_id: str = ""
    topics: dict[str, str] = field(default_factory=dict)
    kills: list[dict[str, Any]] = field(default_factory=list)
    inputs: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    unexpected: dict[str, int] = field(default_factory=dict)
    lost_inputs: dict[str, int] = field(default_factory=dict)
    session_partitions_equal: int = 0
    stores_checked: int = 0
    stores_equal: int = 0
    store_diffs: list[str] = field(default_factory=list)
    final_exit_code: int | None = None
    restored_records: list[int] = field(default_factory=list)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        kills = ", ".join(f"{k['at_s']:.1f}s({k['committed']} committed"
                          + (f", broker {k['broker']}, {k['committed_while_down']} committed while down)"
                             if "broker" in k else ")") for k in self.kills)
        lines = [
            f"guarantee {self.guarantee}: {self.records} records, {len(self.kills)} kills at {kills}",
            f"  inputs {self.inputs}",
            f"  outputs {self.outputs} expected {self.expected}",
            (f"  duplicates {self.duplicates} missing {self.missing} unexpected {self.unexpected} "
             f"lost inputs {self.lost_inputs}"),
            f"  session output partitions equal to the driver's: {self.session_partitions_equal}",
            f"  final state: {self.stores_equal}/{self.stores_checked} stores equal the driver's"
            + (f" (differ: {', '.join(self.store_diffs[:6])})" if self.store_diffs else ""),
            f"  changelog records restored per start: {self.restored_records}",
            f"  final daemon exit code {self.final_exit_code}; {self.seconds:.1f} s",
            f"  RESULT: {'OK' if self.ok else 'FAILED: ' + '; '.join(self.problems)}",
        ]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Input data (deterministic per seed; event times end about now: session changelogs are
# compact,delete and the broker applies retention.ms to record times)


def make_inputs(n: int, seed: int) -> tuple[list[tuple[str, Any, int]], list[tuple[str, Any, int]], list[tuple[str, Any, int]]]:
    """``(rates, clicks, payments)`` with ``n`` clicks + payments in total (60/40)."""
    rng = random.Random(seed)
    n_clicks = n * 6 // 10
    n_payments = n - n_clicks
    step = 20  # ms between consecutive inputs of one kind
    span = max(n_clicks, n_payments) * step
    now = int(time.time() * 1000)
    base = now - span - 60_000
    clicks = []
    for i in range(n_clicks):
        ts = base + i * step + rng.randint(-3_000, 3_000)
        if rng.random() < 0.002:
            ts -= 3_600_000  # an hour late: dropped by the session operator
        clicks.append((f"user-{rng.randrange(20_000):05d}", {"page": f"/p/{rng.randrange(50)}", "i": i}, ts))
    payments = []
    for i in range(n_payments):
        currency = rng.choice(CURRENCIES) if rng.random() > 0.001 else "XXX"
        ts = base + i * step + rng.randint(-3_000, 3_000)
        if rng.random() < 0.001:
            ts -= 2 * 3_600_000
        pid = f"pay-{i:07d}"
        payments.append((pid, {"id": pid, "amount": round(rng.uniform(1, 500), 2), "currency": currency}, ts))
    rates = []
    for t in range(base - 3_600_000, base + span + 600_000, 600_000):
        for c in CURRENCIES:
            value = None if rng.random() < 0.02 else round(rng.uniform(0.1, 3.0), 4)
            rates.append((c, value, t + rng.randint(0, 599_999)))
    return rates, clicks, payments


def _dumps(v: Any) -> bytes | None:
    return None if v is None else json.dumps(v).encode()


def _partition(key: str, partitions: int) -> int:
    from streamproc.engine.partitioning import partition_for

    return partition_for(key.encode(), partitions)


# ------------------------------------------------------------------------------------------------
# Kafka helpers (standalone: the harness does not import the tests)


async def create_topics(bootstrap: str, names: list[str], partitions: int, replication: int = 1,
                        configs: dict[str, str] | None = None) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, replication, topic_configs=dict(configs or {}))
                                   for n in names], timeout_ms=30_000)
        deadline = time.monotonic() + 60
        while True:
            described = await admin.describe_topics(names)
            if all(t["error_code"] == 0 and len(t["partitions"]) == partitions
                   and all(p["leader"] >= 0 for p in t["partitions"]) for t in described):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {names} not ready: {described}")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def produce(producer: Any, topic: str, records: list[tuple[str, Any, int]]) -> None:
    futures = [await producer.send(topic, key=k.encode(), value=_dumps(v), timestamp_ms=ts) for k, v, ts in records]
    await asyncio.gather(*futures)


async def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        out = {}
        for p in range(partitions):
            off = await consumer.committed(TopicPartition(topic, p))
            out[p] = -1 if off is None else off
        return out
    finally:
        await consumer.stop()


async def committed_inputs(bootstrap: str, group: str, topics: dict[str, str], partitions: int) -> int:
    """Clicks and payments committed by the daemon so far."""
    total = 0
    for name in ("clicks", "payments"):
        total += sum(max(0, o) for o in (await committed_offsets(bootstrap, group, topics[name], partitions)).values())
    return total


async def unprocessed(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    """Records of ``topic`` at or after the group's committed offsets (read_committed: records of
    aborted transactions and transaction markers do not count)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    committed = await committed_offsets(bootstrap, group, topic, partitions)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed", auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        left = 0
        for tp in tps:
            start = max(committed[tp.partition], 0)
            if start >= ends[tp]:
                continue
            consumer.seek(tp, start)
        todo = {tp for tp in tps if max(committed[tp.partition], 0) < ends[tp]}
        deadline = time.monotonic() + 30
        while todo and time.monotonic() < deadline:
            batch = await consumer.getmany(*todo, timeout_ms=300, max_records=50_000)
            for tp, msgs in batch.items():
                left += sum(1 for m in msgs if m.offset < ends[tp])
            for tp in list(todo):
                if await consumer.position(tp) >= ends[tp]:
                    todo.discard(tp)
        return left + (1 if todo else 0)
    finally:
        await consumer.stop()


async def read_all(bootstrap: str, topic: str, isolation_level: str, *, timeout: float = 300.0,
                   missing_ok: bool = True) -> list[Any]:
    """Every record of ``topic`` below the end offsets read at the call (for read_committed: the
    last stable offsets), in partition order. A topic without metadata after 30 s gives ``[]``
    (``missing_ok``) or a TimeoutError; so does a read not done in ``timeout`` seconds."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest", isolation_level=isolation_level)
    await consumer.start()
    try:
        parts: Any = None
        metadata_deadline = time.monotonic() + 30
        while not parts:
            await consumer._client.force_metadata_update()
            parts = consumer.partitions_for_topic(topic)
            if not parts and time.monotonic() > metadata_deadline:
                if missing_ok:
                    return []
                raise TimeoutError(f"topic {topic!r} has no metadata after 30 s")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        out: list[Any] = []
        todo = {tp for tp in tps if ends[tp] > 0}
        for tp in tps:
            await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_all({topic!r}): partitions {sorted(todo)} not read to {ends} in {timeout} s")
            batch = await consumer.getmany(*todo, timeout_ms=300, max_records=50_000)
            for tp, msgs in batch.items():
                out.extend(m for m in msgs if m.offset < ends[tp])
            for tp in list(todo):
                if await consumer.position(tp) >= ends[tp]:
                    todo.discard(tp)
        return out
    finally:
        await consumer.stop()


# ------------------------------------------------------------------------------------------------
# The daemon process


class Daemon:
    """``streamproc run scripts.fault.fault_topology`` as a subprocess with its stderr in ``workdir/run-<n>.log``."""

    def __init__(self, workdir: Path, bootstrap: str, app_id: str, topics: dict[str, str], cfg: FaultConfig) -> None:
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.app_id = app_id
        self.topics = topics
        self.cfg = cfg
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []

    def start(self) -> None:
        script = Path(sys.executable).parent / "streamproc"
        cmd = [str(script)] if script.exists() else [sys.executable, "-m", "streamproc.cli"]
        env = {**os.environ, **{f"FAULT_{k.upper()}": v for k, v in self.topics.items()},
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        log = self.workdir / f"run-{self.runs}.log"
        self.logs.append(log)
        self.runs += 1
        self.proc = subprocess.Popen(
            [*cmd, "run", TOPOLOGY_MODULE, f"--bootstrap-servers={self.bootstrap}",
             f"--application-id={self.app_id}", f"--processing-guarantee={self.cfg.guarantee}",
             f"--state-dir={self.workdir / 'state'}", f"--commit-interval-ms={self.cfg.commit_interval_ms}",
             "--consumer-config", "session_timeout_ms=6000", "--consumer-config", "heartbeat_interval_ms=1000",
             "--max-poll-records", "2000", "--loop", "asyncio", "--log-level", "info",
             f"--replication-factor={self.cfg.replication}",
             *(f"--topic-config={k}={v}" for k, v in sorted(self.cfg.topic_configs.items()))],
            env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)

    async def wait_running(self, tasks: int, timeout: float) -> float:
        """Wait until the current run logged ``tasks`` tasks running; return the seconds it took."""
        import re

        started = time.monotonic()
        while True:
            text = self.logs[-1].read_text(errors="replace") if self.logs[-1].exists() else ""
            if len(set(re.findall(r"task (\S+) running", text))) >= tasks:
                return time.monotonic() - started
            if not self.alive():
                raise RuntimeError(f"the daemon exited early:\n{self.log_tail()}")
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{tasks} tasks not running after {timeout} s:\n{self.log_tail()}")
            await asyncio.sleep(0.2)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    async def terminate(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                return -9
            await asyncio.sleep(0.1)
        return self.proc.returncode

    def stop_hard(self) -> None:
        if self.alive():
            self.kill()

    def log_tail(self, lines: int = 30) -> str:
        if not self.logs:
            return ""
        text = self.logs[-1].read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


# ------------------------------------------------------------------------------------------------
# Expected results: one TopologyTestDriver per partition


class Expected:
    def __init__(self, cfg: FaultConfig, topics: dict[str, str], app_id: str, rates: list, clicks: list,
                 payments: list) -> None:
        from streamproc.testing import TopologyTestDriver

        p_count = cfg.partitions
        self.drivers = {p: TopologyTestDriver(build(topics), application_id=app_id) for p in range(p_count)}
        for c, v, ts in rates:
            self.drivers[_partition(c, p_count)].input_topic(topics["rates"]).pipe(c, v, ts)
        for u, v, ts in clicks:
            self.drivers[_partition(u, p_count)].input_topic(topics["clicks"]).pipe(u, v, ts)
        for pid, v, ts in payments:
            self.drivers[_partition(v["currency"], p_count)].input_topic(topics["payments"]).pipe(pid, v, ts)
        self.sessions = {p: [(r.key, r.value, r.timestamp) for r in d.output_topic(topics["sessions_out"]).read_records()]
                         for p, d in self.drivers.items()}
        self.payments = Counter((r.key, json.dumps(r.value, sort_keys=True), r.timestamp)
                                for d in self.drivers.values()
                                for r in d.output_topic(topics["payments_out"]).read_records())

    def close(self) -> None:
        for d in self.drivers.values():
            d.close()


def build(topics: dict[str, str]) -> Any:
    return fault_topology.build_for(topics["clicks"], topics["rates"], topics["payments"], topics["sessions_out"],
                                    topics["payments_out"])


def comparable(store: Any) -> Any:
    """A store's contents as plain data; the join buffer's keys ``(ts, key, arrival)`` lose the
    arrival number (it depends on how the repartitioned records interleaved) and its values
    ``(value, origin)`` their origin (a position in the repartition topic, which differs likewise)."""
    from streamproc.processors.origin import Origin

    inner = getattr(store, "inner", store)
    if inner.kind == "versioned":
        return sorted((k, [(v.value, v.timestamp) for v in inner.versions(k)]) for k in inner.keys())
    items = [(kv.key, kv.value) for kv in inner.all()]
    if inner.kind == "key_value" and items and isinstance(items[0][0], (list, tuple)) and len(items[0][0]) == 3:
        return sorted((k[0], k[1], json.dumps(v[0] if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Origin)
                                              else v, sort_keys=True)) for k, v in items)
    return items


async def restored_stores(bootstrap: str, app_id: str, topology: Any, partitions: int) -> dict[tuple[int, int, str], Any]:
    """Every task's stores rebuilt from the changelogs (read_committed)."""
    from streamproc.engine.task import Task
    from streamproc.stores import ChangelogRecord

    out: dict[tuple[int, int, str], Any] = {}
    by_topic: dict[str, list[Any]] = {}
    for st in topology.subtopologies_for(app_id):
        for p in range(partitions):
            task = Task(topology, st.id, p, app_id)
            for name, topic in task.changelog_topics.items():
                if topic not in by_topic:
                    by_topic[topic] = await read_all(bootstrap, topic, "read_committed")
                task.restore(name, [ChangelogRecord(r.key, r.value, r.timestamp)
                                    for r in by_topic[topic] if r.partition == p])
            for name, store in task.stores.items():
                out[(st.id, p, name)] = comparable(store)
            task.close()
    return out


# ------------------------------------------------------------------------------------------------
# The run


async def run_fault_test(bootstrap: str, cfg: FaultConfig, cluster: Any = None) -> FaultReport:
    started = time.monotonic()
    rng = random.Random(cfg.seed)
    run_id = uuid.uuid4().hex[:8]
    workdir = cfg.workdir or Path(tempfile.mkdtemp(prefix=f"streamproc-fault-{run_id}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    topics = {k: f"fault-{run_id}-{k}" for k in ("clicks", "rates", "payments", "sessions_out", "payments_out")}
    app_id = f"fault-{run_id}"
    report = FaultReport(cfg.guarantee, cfg.records, app_id, dict(topics))
    rates, clicks, payments = make_inputs(cfg.records, cfg.seed)
    report.inputs = {"rates": len(rates), "clicks": len(clicks), "payments": len(payments)}
    await create_topics(bootstrap, [topics["clicks"], topics["rates"], topics["payments"]], cfg.partitions,
                        cfg.replication, cfg.topic_configs)
    if cfg.target == "broker" and cluster is None:
        raise ValueError("target='broker' needs the cluster handle")

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=True)
    await producer.start()
    daemon = Daemon(workdir, bootstrap, app_id, topics, cfg)
    try:
        await produce(producer, topics["rates"], rates)
        daemon.start()
        deadline = time.monotonic() + 120
        while await unprocessed(bootstrap, app_id, topics["rates"], cfg.partitions) > 0:
            if not daemon.alive():
                raise RuntimeError(f"the daemon exited early:\n{daemon.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the daemon did not commit the rates in 120 s:\n{daemon.log_tail()}")
            await asyncio.sleep(0.3)

        # clicks and payments, interleaved, at a steady pace while the daemon is killed
        mixed = [(topics["clicks"], r) for r in clicks] + [(topics["payments"], r) for r in payments]
        mixed.sort(key=lambda t: t[1][1]["i"] if t[0] == topics["clicks"] else int(t[1][0][4:]))
        phase = cfg.kills * (cfg.min_kill_s + cfg.max_kill_s) / 2 + 4
        rate = cfg.produce_rate or max(500.0, len(mixed) / phase)

        async def feed() -> None:
            chunk = 1_000
            t0 = time.monotonic()
            for i in range(0, len(mixed), chunk):
                part = mixed[i:i + chunk]
                futures = [await producer.send(t, key=k.encode(), value=_dumps(v), timestamp_ms=ts)
                           for t, (k, v, ts) in part]
                await asyncio.gather(*futures)
                ahead = (i + chunk) / rate - (time.monotonic() - t0)
                if ahead > 0:
                    await asyncio.sleep(ahead)

        feeding = asyncio.ensure_future(feed())
        for _ in range(cfg.kills):
            await asyncio.sleep(rng.uniform(cfg.min_kill_s, cfg.max_kill_s))
            if not daemon.alive():
                raise RuntimeError(f"the daemon exited by itself:\n{daemon.log_tail()}")
            if cfg.target == "broker":
                index = rng.randrange(len(cluster.nodes))
                before = await committed_inputs(bootstrap, app_id, topics, cfg.partitions)
                cluster.kill(index)
                at = time.monotonic() - started
                # Sample the group's committed offsets while the broker is down: a single query can
                # land in the group coordinator's fail-over (no offsets yet: reads as 0).
                during = before
                down_until = time.monotonic() + cfg.broker_down_s
                while time.monotonic() < down_until:
                    await asyncio.sleep(min(0.5, max(0.0, down_until - time.monotonic())))
                    try:
                        during = max(during, await asyncio.wait_for(
                            committed_inputs(bootstrap, app_id, topics, cfg.partitions), 5.0))
                    except Exception:
                        pass
                if not daemon.alive():
                    raise RuntimeError(f"the daemon exited while a broker was down:\n{daemon.log_tail()}")
                await asyncio.to_thread(cluster.restart, index)
                report.kills.append({"at_s": at, "committed": before, "broker": index,
                                     "committed_while_down": during - before})
                if cfg.verbose:
                    print(f"broker {index} killed at {at:.1f} s; {during - before} inputs committed while "
                          f"it was down", flush=True)
                continue
            daemon.kill()
            report.kills.append({"at_s": time.monotonic() - started,
                                 "committed": await committed_inputs(bootstrap, app_id, topics, cfg.partitions)})
            if cfg.verbose:
                print(f"kill {len(report.kills)} at {report.kills[-1]['at_s']:.1f} s, "
                      f"{report.kills[-1]['committed']} inputs committed", flush=True)
            daemon.start()
        await feeding
        n_tasks = sum(cfg.partitions for _ in build(topics).subtopologies_for(app_id))
        await daemon.wait_running(n_tasks, 120)

        # until everything is processed
        repartitions = sorted({t for st in build(topics).subtopologies_for(app_id) for t in st.repartition_topics})
        deadline = time.monotonic() + 300
        while True:
            left = sum([await unprocessed(bootstrap, app_id, t, cfg.partitions)
                        for t in (topics["clicks"], topics["payments"], *repartitions)])
            if left == 0:
                break
            if not daemon.alive():
                raise RuntimeError(f"the daemon exited by itself:\n{daemon.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{left} records still unprocessed after 300 s:\n{daemon.log_tail()}")
            await asyncio.sleep(0.5)
        report.final_exit_code = await daemon.terminate()
        if report.final_exit_code != 0:
            report.problems.append(f"final daemon exit code {report.final_exit_code}")
    finally:
        await producer.stop()
        daemon.stop_hard()
    for log in daemon.logs:
        import re

        report.restored_records.append(sum(int(n) for n in re.findall(r"restored (\d+) changelog records",
                                                                       log.read_text(errors="replace"))))
    check(report, await collect(bootstrap, cfg, topics, app_id, rates, clicks, payments))
    report.seconds = time.monotonic() - started
    return report


@dataclass
class Observed:
    expected: Expected
    sessions: dict[int, list[tuple[Any, Any, int]]]
    payments: Counter[Any]
    stores: dict[tuple[int, int, str], Any]
    driver_stores: dict[tuple[int, int, str], Any]
    clicks: list[tuple[str, Any, int]]
    payment_inputs: list[tuple[str, Any, int]]


async def collect(bootstrap: str, cfg: FaultConfig, topics: dict[str, str], app_id: str, rates: list, clicks: list,
                  payments: list) -> Observed:
    isolation = "read_committed" if cfg.guarantee == "exactly_once_v2" else "read_uncommitted"
    expected = Expected(cfg, topics, app_id, rates, clicks, payments)
    sessions: dict[int, list[Any]] = {p: [] for p in range(cfg.partitions)}
    for r in await read_all(bootstrap, topics["sessions_out"], isolation):
        sessions[r.partition].append((r.key.decode(), json.loads(r.value), r.timestamp))
    pay = Counter((r.key.decode(), json.dumps(json.loads(r.value), sort_keys=True), r.timestamp)
                  for r in await read_all(bootstrap, topics["payments_out"], isolation))
    topology = build(topics)
    stores = await restored_stores(bootstrap, app_id, topology, cfg.partitions)
    driver_stores = {}
    for (sid, p, name) in stores:
        driver_stores[(sid, p, name)] = comparable(expected.drivers[p].state_store(name))
    return Observed(expected, sessions, pay, stores, driver_stores, clicks, payments)


def check(report: FaultReport, obs: Observed) -> None:
    exactly_once = report.guarantee == "exactly_once_v2"
    exp = obs.expected
    got_sessions = [r for part in obs.sessions.values() for r in part]
    want_sessions = [r for part in exp.sessions.values() for r in part]
    report.outputs = {"sessions": len(got_sessions), "payments": sum(obs.payments.values())}
    report.expected = {"sessions": len(want_sessions), "payments": sum(exp.payments.values())}

    def key(r: Any) -> Any:
        return r[0], json.dumps(r[1], sort_keys=True), r[2]

    got_c, want_c = Counter(map(key, got_sessions)), Counter(map(key, want_sessions))
    report.duplicates = {"sessions": sum(n - 1 for n in got_c.values() if n > 1),
                         "payments": sum(n - 1 for n in obs.payments.values() if n > 1)}
    report.missing = {"sessions": sum((want_c - got_c).values()), "payments": sum((exp.payments - obs.payments).values())}
    report.unexpected = {"sessions": sum((got_c - want_c).values()), "payments": sum((obs.payments - exp.payments).values())}
    report.session_partitions_equal = sum(1 for p in exp.sessions if obs.sessions.get(p) == exp.sessions[p])

    # no input lost: each click inside an emitted session of its user, unless the driver did not emit it either
    def covered(outputs: list[Any]) -> set[tuple[str, int]]:
        windows: dict[str, list[tuple[int, int]]] = {}
        for k, v, _ in outputs:
            windows.setdefault(k, []).append((v["start"], v["end"]))
        return {(u, ts) for u, _, ts in obs.clicks if any(s <= ts <= e for s, e in windows.get(u, ()))}

    want_cov, got_cov = covered(want_sessions), covered(got_sessions)
    paid = {k for k, _, _ in obs.payments}
    want_paid = {k for k, _, _ in exp.payments}
    report.lost_inputs = {"clicks": len(want_cov - got_cov), "payments": len(want_paid - paid)}
    if any(report.lost_inputs.values()):
        report.problems.append(f"inputs lost: {report.lost_inputs}")
    if exactly_once:
        if report.session_partitions_equal != len(exp.sessions):
            report.problems.append("session output differs from the driver's")
        if any(report.duplicates.values()) or any(report.missing.values()) or any(report.unexpected.values()):
            report.problems.append("exactly-once output is not the driver's output")
    elif any(report.missing.values()) and not any(report.unexpected.values()):
        report.problems.append(f"outputs missing: {report.missing}")

    report.stores_checked = len(obs.stores)
    for k, contents in sorted(obs.stores.items()):
        if contents == obs.driver_stores[k]:
            report.stores_equal += 1
        else:
            report.store_diffs.append(f"{k[2]}[{k[1]}]")
    if exactly_once and report.store_diffs:
        report.problems.append(f"final state differs from the driver's: {report.store_diffs}")
    exp.close()


# ------------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--guarantee", choices=("at_least_once", "exactly_once_v2", "both"), default="both")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-kill-s", type=float, default=2.0)
    ap.add_argument("--max-kill-s", type=float, default=9.0)
    ap.add_argument("--quick", action="store_true", help="30k records, 2 kills")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.kills = 30_000, 2
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    handle = None
    if not bootstrap:
        handle = localkafka.start_single(timeout=180)
        bootstrap = handle.bootstrap
    ok = True
    try:
        guarantees = ["at_least_once", "exactly_once_v2"] if args.guarantee == "both" else [args.guarantee]
        for g in guarantees:
            cfg = FaultConfig(records=args.records, kills=args.kills, guarantee=g, partitions=args.partitions,
                              seed=args.seed, min_kill_s=args.min_kill_s, max_kill_s=args.max_kill_s,
                              workdir=args.workdir / g if args.workdir else None, verbose=True)
            report = asyncio.run(run_fault_test(bootstrap, cfg))
            print(report.summary(), flush=True)
            ok = ok and report.ok
    finally:
        if handle is not None:
            handle.stop(grace=5.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
