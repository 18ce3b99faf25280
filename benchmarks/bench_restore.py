"""Restoration speed against a real broker.

1. **Restore rate** (changelog records/s) of the daemon's restore path (``Restorer``: a consumer
   outside the group, fetch, ``ChangelogRecord``, the change-logging wrapper's ``restore`` through
   the store's put rules) for a changelog partition of ``--entries`` records (default 1M) of

   - a session store (one session per record, distinct keys: 1M live sessions at the end), and
   - a versioned store (``--entries`` versions: ``entries/10`` keys x 10 versions, all inside
     history retention).

2. **Time from start to processing** after a restart of a ``StreamApp`` (sessions topology, one
   partition) whose session changelog holds ``--entries`` sessions: from ``app.start()`` until its
   task runs (topic checks, group join, restoration), without a snapshot (full replay) and with the
   snapshot written by the previous clean stop (``state_dir``). The snapshot's write time (at the
   clean stop) and size are printed too.

Broker: ``$KAFKA_BOOTSTRAP_SERVERS`` or a local one started (and stopped) here. ``--quick``: 100k
entries. Prints the load average, since figures are noisy on a shared machine.

Run from the repository root: ``python -m benchmarks.bench_restore [--quick] [--entries N]``.
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
from pathlib import Path
from typing import Any

from benchmarks.harness import create_topics, produce_batched, run_on_broker


async def create_topic(bootstrap: str, name: str, configs: dict[str, str] | None = None) -> None:
    """A one-partition topic with ``configs``, its partition led."""
    await create_topics(bootstrap, [name], 1, configs, timeout=30.0)


async def produce_records(bootstrap: str, topic: str, records: list[Any]) -> float:
    """Send ``ChangelogRecord`` s to partition 0 in producer batches; return seconds."""
    return await produce_batched(bootstrap, ((topic, 0, r.key, r.value, r.timestamp) for r in records),
                                 linger_ms=5, max_batch_size=1024 * 1024)


def session_records(n: int, store: Any, updates: int = 1) -> list[Any]:
    """``n`` sessions, each written ``updates`` times (drained between rounds, so every update is a
    changelog record, as with commits in between)."""
    from streamproc.records import Windowed

    base = int(time.time() * 1000) - 20 * 60_000  # recent: the changelog's retention.ms is on record time
    out: list[Any] = []
    for u in range(updates):
        for i in range(n):
            start = base + (i % 600_000)
            store.set_record_timestamp(start)
            store.put(Windowed(f"user-{i:07d}", start, start + 1_000), 1 + u)
        out += store.drain()
    return out


def versioned_records(n: int, store: Any) -> list[Any]:
    base = int(time.time() * 1000) - 30 * 60_000
    keys = max(1, n // 10)
    for v in range(10):
        for k in range(keys):
            store.put(f"key-{k:07d}", {"rate": k + v / 10}, base + v * 60_000 + k % 1000)
    return store.drain()


async def restore_rate(bootstrap: str, topic: str, make_store: Any, n: int) -> tuple[float, int]:
    from aiokafka import TopicPartition

    from streamproc.runtime.metrics import Metrics
    from streamproc.runtime.restore import Restorer

    store = make_store()
    restorer = Restorer(bootstrap, f"bench-restore-{uuid.uuid4().hex[:6]}", Metrics(), {}, 5_000)
    await restorer.start()
    done = asyncio.Event()
    t0 = time.perf_counter()
    restorer.add("bench", {TopicPartition(topic, 0): store}, done.set)
    await done.wait()
    elapsed = time.perf_counter() - t0
    await restorer.stop()
    size = len(store)
    store.close()
    return n / elapsed, size


async def time_to_running(bootstrap: str, app_id: str, clicks: str, state_dir: str | None) -> tuple[float, Any]:
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from topologies import sessions

    app = StreamApp(sessions.build(input=clicks, output=f"{app_id}-out"),
                    Config(application_id=app_id, bootstrap_servers=bootstrap, state_dir=state_dir or "",
                           loop="asyncio", restore_log_interval_ms=5_000))
    t0 = time.perf_counter()
    runner = asyncio.ensure_future(app.run())
    assigned = None
    while len(app.tasks.running()) < 1:
        if runner.done():
            await runner
        if assigned is None and len(app.tasks) > 0:
            assigned = time.perf_counter()
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - t0
    app.bench_restore_s = time.perf_counter() - (assigned or t0)  # type: ignore[attr-defined]
    t1 = time.perf_counter()
    await app.stop()
    await runner
    return elapsed, (time.perf_counter() - t1, app)


async def main_async(bootstrap: str, entries: int) -> None:
    from streamproc import serde
    from streamproc.stores import Stores, change_logged, changelog_topic_config

    run = uuid.uuid4().hex[:6]
    print(f"entries {entries:,}; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}", flush=True)

    # 1. restore rates
    def session_store() -> Any:
        return change_logged(Stores.in_memory_session_store("s", 3_600_000), serde.STRING, serde.INT)

    def versioned_store() -> Any:
        return change_logged(Stores.in_memory_versioned_store("v", 3_600_000), serde.STRING, serde.JSON)

    for kind, make, gen in (("session", session_store, session_records), ("versioned", versioned_store,
                                                                          versioned_records)):
        src = make()
        t0 = time.perf_counter()
        records = gen(entries, src)
        src.close()
        build_s = time.perf_counter() - t0
        topic = f"bench-{run}-{kind}-changelog"
        await create_topic(bootstrap, topic, changelog_topic_config(make()))
        produce_s = await produce_records(bootstrap, topic, records)
        rate, size = await restore_rate(bootstrap, topic, make, len(records))
        print(f"restore {kind:9s} store: {len(records):,} changelog records -> {size:,} entries, "
              f"{rate:,.0f} records/s ({len(records) / rate:.1f} s)  [built in {build_s:.1f} s, produced in "
              f"{produce_s:.1f} s]", flush=True)
        del records

    # 2. time from start to processing, without and with a snapshot
    await restart_times(bootstrap, f"bench-{run}-a", entries, 1)
    await restart_times(bootstrap, f"bench-{run}-b", entries // 4, 4)


async def restart_times(bootstrap: str, app_id: str, entries: int, updates: int) -> None:
    """A sessions app whose changelog holds ``entries`` sessions written ``updates`` times each."""
    from streamproc.engine.task import Task
    from streamproc.stores import changelog_topic_config
    from topologies import sessions

    clicks = f"{app_id}-clicks"
    await create_topic(bootstrap, clicks)
    probe = Task(sessions.build(input=clicks, output="x"), 0, 0, app_id)
    store = probe.stores[sessions.STORE]
    records = session_records(entries, store, updates)
    topic = probe.changelog_topics[sessions.STORE]
    await create_topic(bootstrap, topic, changelog_topic_config(store))
    probe.close()
    await produce_records(bootstrap, topic, records)
    print(f"restart of a sessions app: {entries:,} live sessions, {len(records):,} changelog records", flush=True)
    state_dir = tempfile.mkdtemp(prefix="bench-restore-state-")
    try:
        without, (_, app0) = await time_to_running(bootstrap, app_id, clicks, None)
        print(f"  start -> processing, no snapshot (full replay): {without:.2f} s "
              f"(assignment -> running {app0.bench_restore_s:.2f} s)", flush=True)
        first, (stop_s, app) = await time_to_running(bootstrap, app_id, clicks, state_dir)
        snap = Path(state_dir) / app_id / "snapshots"
        size = sum(p.stat().st_size for p in snap.glob("*.snapshot"))
        print(f"  (with an empty state_dir: {first:.2f} s; the clean stop wrote {len(app.snapshots.saved)} "
              f"snapshot(s), {size / 1e6:.1f} MB, stop took {stop_s:.2f} s)", flush=True)
        with_snap, (_, app2) = await time_to_running(bootstrap, app_id, clicks, state_dir)
        print(f"  start -> processing, with the snapshot ({len(app2.snapshots.loaded)} loaded, "
              f"{len(app2.snapshots.rejected)} rejected): {with_snap:.2f} s (assignment -> running "
              f"{app2.bench_restore_s:.2f} s, x{app0.bench_restore_s / app2.bench_restore_s:.1f} faster)", flush=True)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k entries")
    args = ap.parse_args(argv)
    entries = 100_000 if args.quick else args.entries
    return run_on_broker(main_async, entries)


if __name__ == "__main__":
    sys.exit(main())
