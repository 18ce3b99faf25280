"""How long a rebalance stops processing: the design before issue 23 against the current one.

A sessions application (``topologies/sessions.py``) whose session changelog holds ``--entries``
live sessions (default 1M) spread over 8 partitions runs as two instances in this process (one
event loop, as two processes would share this machine's 2 cores). For each partition the
benchmark samples, every 5 ms, whether some instance runs its task; the **pause** of a partition
is the time it had no running task. Two scenarios, each with both designs in the same run:

- **join**: one instance runs the 8 tasks; a second one joins (4 tasks move).
  *before*: ``suspended_task_retention_ms=0`` (every revoked task closed, every assigned task
  restored from the changelog, as before); *now*: the defaults (revoked tasks kept in memory, the
  tasks that stay resume at once).
- **restart**: two instances run 4 tasks each; one stops cleanly and starts again.
  *before*: dynamic membership, no snapshots, retention 0 (two rebalances, full restores);
  *now*: ``group_instance_id`` (static membership: no rebalance), ``state_dir`` (the restarted
  instance loads its snapshots and replays only the tail).

Printed per scenario and design: the longest and the mean pause over the 8 partitions, and the
changelog records restored. Broker: ``$KAFKA_BOOTSTRAP_SERVERS`` or a local one started here.

Run from the repository root: ``python -m benchmarks.bench_rebalance [--quick] [--entries N]``
(``--quick``: 100k sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness import create_topics, produce_batched, run_on_broker

PARTITIONS = 8
SAMPLE_S = 0.005


@dataclass
class Pauses:
    """Per partition: seconds without a running task since :meth:`start`."""

    apps: list[Any]
    paused: dict[int, float] = field(default_factory=lambda: dict.fromkeys(range(PARTITIONS), 0.0))
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._sample())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    async def _sample(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(SAMPLE_S)
            now = time.perf_counter()
            running = {mt.id.partition for app in self.apps for mt in app.tasks.running()}
            for p in range(PARTITIONS):
                if p not in running:
                    self.paused[p] += now - last
            last = now


async def session_changelog(bootstrap: str, app_id: str, entries: int) -> str:
    """Create the app's clicks topic and session changelog (8 partitions); write ``entries`` live
    sessions into the changelog; return the clicks topic."""
    from streamproc.engine.task import Task
    from streamproc.records import Windowed
    from streamproc.stores import changelog_topic_config
    from topologies import sessions

    clicks = f"{app_id}-clicks"
    await create_topics(bootstrap, [clicks], PARTITIONS, None, timeout=30.0)
    base = int(time.time() * 1000) - 20 * 60_000
    rows: list[tuple[str, int, bytes | None, bytes | None, int]] = []
    topic = ""
    for p in range(PARTITIONS):
        probe = Task(sessions.build(input=clicks, output="x"), 0, p, app_id)
        store = probe.stores[sessions.STORE]
        topic = probe.changelog_topics[sessions.STORE]
        if p == 0:
            await create_topics(bootstrap, [topic], PARTITIONS, changelog_topic_config(store), timeout=30.0)
        for i in range(p, entries, PARTITIONS):
            start = base + (i % 600_000)
            store.set_record_timestamp(start)
            store.put(Windowed(f"user-{i:07d}", start, start + 1_000), 1)
        rows += [(topic, p, r.key, r.value, r.timestamp) for r in store.drain()]
        probe.close()
    await produce_batched(bootstrap, rows, linger_ms=5, max_batch_size=1024 * 1024)
    return clicks


def new_app(bootstrap: str, app_id: str, clicks: str, **settings: Any) -> Any:
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from topologies import sessions

    return StreamApp(sessions.build(input=clicks, output=f"{app_id}-out"),
                     Config(application_id=app_id, bootstrap_servers=bootstrap, loop="asyncio",
                            restore_log_interval_ms=60_000, commit_interval_ms=500, **settings))


async def until(cond: Any, runners: Sequence[asyncio.Task[Any]], timeout: float = 600.0) -> None:
    deadline = time.perf_counter() + timeout
    while not cond():
        for r in runners:
            if r.done():
                await r
        if time.perf_counter() > deadline:
            raise TimeoutError("the group did not settle")
        await asyncio.sleep(0.01)


def settled(apps: Sequence[Any], counts: Sequence[int]) -> bool:
    return all(len(a.tasks.running()) == n and len(a.tasks) == n for a, n in zip(apps, counts, strict=True))


def restored(apps: Sequence[Any]) -> float:
    return sum(a.metrics.value("streamproc_restored_records_total") for a in apps)


def report(scenario: str, design: str, pauses: Pauses, restored_records: float, extra: str = "") -> None:
    values = sorted(pauses.paused.values())
    print(f"  {scenario:8s} {design:7s} longest pause {values[-1]:7.2f} s   mean {sum(values) / len(values):7.2f} s"
          f"   restored {restored_records:>11,.0f} changelog records{extra}", flush=True)


async def join(bootstrap: str, entries: int, design: str) -> None:
    app_id = f"bench-rebalance-{uuid.uuid4().hex[:6]}"
    clicks = await session_changelog(bootstrap, app_id, entries)
    settings: dict[str, Any] = {"consumer_config": {"heartbeat_interval_ms": 500}}
    if design == "before":
        settings["suspended_task_retention_ms"] = 0
    a = new_app(bootstrap, app_id, clicks, **settings)
    ra = asyncio.ensure_future(a.run())
    await until(lambda: settled([a], [PARTITIONS]), [ra])
    base = restored([a])
    b = new_app(bootstrap, app_id, clicks, **settings)
    pauses = Pauses([a, b])
    pauses.start()
    rb = asyncio.ensure_future(b.run())
    await until(lambda: settled([a, b], [4, 4]), [ra, rb])
    await pauses.stop()
    report("join", design, pauses, restored([a, b]) - base)
    for app, runner in ((b, rb), (a, ra)):
        await app.stop()
        await runner


async def restart(bootstrap: str, entries: int, design: str) -> None:
    app_id = f"bench-rebalance-{uuid.uuid4().hex[:6]}"
    clicks = await session_changelog(bootstrap, app_id, entries)
    dirs = [tempfile.mkdtemp(prefix="bench-rebalance-") for _ in range(2)]
    try:
        def settings(i: int) -> dict[str, Any]:
            consumer = {"heartbeat_interval_ms": 500}
            if design == "before":
                return {"suspended_task_retention_ms": 0, "consumer_config": consumer}
            return {"group_instance_id": f"{app_id}-{i}", "state_dir": dirs[i],
                    "consumer_config": {**consumer, "session_timeout_ms": 30_000}}

        a = new_app(bootstrap, app_id, clicks, **settings(0))
        ra = asyncio.ensure_future(a.run())
        await until(lambda: settled([a], [PARTITIONS]), [ra])
        b = new_app(bootstrap, app_id, clicks, **settings(1))
        rb = asyncio.ensure_future(b.run())
        await until(lambda: settled([a, b], [4, 4]), [ra, rb])
        base = restored([a])
        pauses = Pauses([a, b])
        pauses.start()
        await b.stop()
        await rb
        b2 = new_app(bootstrap, app_id, clicks, **settings(1))
        pauses.apps = [a, b2]
        rb2 = asyncio.ensure_future(b2.run())
        await until(lambda: settled([a, b2], [4, 4]), [ra, rb2])
        await pauses.stop()
        report("restart", design, pauses, restored([a, b2]) - base,
               f"; {len(b2.snapshots.loaded) if b2.snapshots else 0} snapshot(s) loaded"
               if design == "now" else "")
        for app, runner in ((b2, rb2), (a, ra)):
            await app.stop()
            await runner
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


async def main_async(bootstrap: str, entries: int) -> None:
    load = os.getloadavg()
    print(f"{entries:,} live sessions over {PARTITIONS} partitions; load average {load[0]:.2f} {load[1]:.2f}",
          flush=True)
    for scenario in (join, restart):
        for design in ("before", "now"):
            await scenario(bootstrap, entries, design)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000, help="live sessions in the changelog")
    ap.add_argument("--quick", action="store_true", help="100k sessions")
    args = ap.parse_args(argv)
    entries = 100_000 if args.quick else args.entries
    return run_on_broker(main_async, entries)


if __name__ == "__main__":
    sys.exit(main())
