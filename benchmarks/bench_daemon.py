"""End-to-end throughput of the daemon (sessions topology) next to a raw aiokafka passthrough.

Both run against the same real broker, in the same run, each in its own process (so CPU time and
peak RSS are per phase), on uvloop, over the same input: ``--records N`` clicks (string keys, JSON
values) on an 8-partition topic.

* **passthrough** (the ceiling): a consumer in its own group, ``getmany`` batches, every record
  re-sent unchanged through ``create_batch``/``send_batch`` (the same producer path the daemon
  uses), offsets committed after the sends are acknowledged. No deserialisation, no state.
* **daemon**: ``StreamApp`` running ``topologies.sessions`` (deserialise, session-window count with
  a change-logged store, emit on close, serialise, delayed acks, commits).

The clock runs from "the group has its partitions" to "every input offset is committed" (so topic
creation and the group join are not counted, the final commit is: the daemon commits as soon as it
has processed the last input record, like the passthrough after its last batch, instead of idling
until its next ``commit_interval_ms`` tick). Printed: records/s of input,
the ratio daemon/passthrough (target >= 0.7, issue 25), CPU seconds (user+sys), CPU per record and peak RSS
per phase.
A third row runs the sessions ``Task`` alone over the same records (read first, untimed): the
topology's own processing cost without Kafka I/O, which bounds what any daemon can reach.

``--topology currency`` runs the join example instead (``topologies.currency``: payments re-keyed by
currency through a repartition topic and left-joined with a versioned rates table, every payment
one output): the input is ``--records N`` payments of 40 currencies plus a rate per currency every
10 minutes of event time (loaded before the payments, in the same topics the daemon reads from the
start); the passthrough re-sends the payments; the daemon is done when the payments, the rates and
the repartitioned payments are all processed and committed. No "Task alone" row (two sub-topologies).

``--baseline DIR`` adds a phase: the same daemon run with the ``streamproc`` package of another
checkout (e.g. ``git worktree add --detach ../base <commit>`` and ``python setup.py build_ext
--inplace`` there), interleaved with the others, for before/after figures from one run.

``--profile`` re-runs the daemon phase under ``py-spy record`` and prints the top frames (self
samples) and the top streamproc functions (inclusive samples), leaving out the start-up (imports).

Broker: ``--bootstrap`` or ``$KAFKA_BOOTSTRAP_SERVERS``; otherwise a local one is started with
``scripts/kafka/localkafka.py`` and stopped at the end.

Run from the repository root: ``python -m benchmarks.bench_daemon [--quick] [--users 5000,500] ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    Row,
    app_running,
    broker,
    create_topics,
    end_offsets,
    measured,
    passthrough_until,
    produce_batched,
    run_in_child,
)

PARTITIONS = 8


def _input_rows(topic: str, n: int, users: int) -> Iterator[Row]:
    from streamproc.engine.partitioning import partition_for

    rng = random.Random(1)
    # recent event times: the broker deletes records by their timestamps (retention.ms) and Kafka 4
    # rejects timestamps more than an hour ahead
    base = (int(time.time()) - 3_600 - n) * 1_000
    for i in range(n):
        key = f"user-{rng.randrange(users):05d}".encode()
        value = json.dumps({"page": f"/p/{rng.randrange(100)}", "ref": "bench"}).encode()
        yield topic, partition_for(key, PARTITIONS), key, value, base + i * 1_000


async def _produce_input(bootstrap: str, topic: str, n: int, users: int = 5000) -> dict[Any, int]:
    """``n`` clicks of ``users`` users, event time 1 s apart (sessions close all along the run);
    returns end offsets. 5000 users: a user clicks every ~83 min on average, so most sessions
    hold one or two clicks and nearly every input yields an output (the heavy case); 500 users:
    every ~8 min, ~30 clicks per session."""
    await produce_batched(bootstrap, _input_rows(topic, n, users))
    return await end_offsets(bootstrap, [topic], PARTITIONS)


CURRENCIES = [f"C{i:02d}" for i in range(40)]


def _currency_rows(rates: str, payments: str, n: int) -> Iterator[Row]:
    """Rates (each currency a new version every 10 min of event time, from an hour before the first
    payment; 2% tombstones) first, then ``n`` payments 50 ms apart (+-3 s jitter, within the join's
    5 s grace) keyed by payment id."""
    from streamproc.engine.partitioning import partition_for

    rng = random.Random(11)
    span = n * 50
    base = (int(time.time()) - 3_600 - span // 1000 - 600) * 1_000
    for t in range(base - 3_600_000, base + span + 600_000, 600_000):
        for c in CURRENCIES:
            value = None if rng.random() < 0.02 else json.dumps(round(rng.uniform(0.1, 3.0), 4)).encode()
            key = c.encode()
            yield rates, partition_for(key, PARTITIONS), key, value, t + rng.randint(0, 599_999)
    for i in range(n):
        pid = f"pay-{i:07d}"
        key = pid.encode()
        value = json.dumps({"id": pid, "amount": round(rng.uniform(1, 500), 2),
                            "currency": rng.choice(CURRENCIES)}).encode()
        yield payments, partition_for(key, PARTITIONS), key, value, base + i * 50 + rng.randint(-3_000, 3_000)


async def _produce_currency(bootstrap: str, rates: str, payments: str, n: int) -> dict[Any, int]:
    await produce_batched(bootstrap, _currency_rows(rates, payments, n))
    return await end_offsets(bootstrap, [rates, payments], PARTITIONS)


# ---- phases (each in a child process) ----------------------------------------------------------


def _topics(source: str) -> tuple[str, str] | None:
    """``(rates, payments)`` of a currency input (its source is named ``<rates>,<payments>``), else None."""
    rates, comma, payments = source.partition(",")
    return (rates, payments) if comma else None


async def _passthrough(bootstrap: str, source: str, ends: dict[Any, int]) -> float:
    pair = _topics(source)
    if pair is not None:  # the join: the passthrough re-sends the payments
        payments = pair[1]
        return await passthrough_until(bootstrap, [payments], {tp: e for tp, e in ends.items()
                                                               if tp.topic == payments}, PARTITIONS)
    return await passthrough_until(bootstrap, [source], ends, PARTITIONS)


async def _daemon(bootstrap: str, source: str, ends: dict[Any, int]) -> float:
    from aiokafka import TopicPartition

    from streamproc.config import Config

    app_id = f"bench-daemon-{uuid.uuid4().hex[:8]}"
    output = f"bench-out-{uuid.uuid4().hex[:8]}"
    want = {tp: e for tp, e in ends.items() if e}
    pair = _topics(source)
    tasks = PARTITIONS
    if pair is None:
        from topologies import sessions

        topology = sessions.build(input=source, output=output)
    else:
        from topologies import currency

        currency.RATES, currency.PAYMENTS, currency.OUTPUT = pair[0], pair[1], output
        topology = currency.build()
        tasks = 2 * PARTITIONS
        repartition = [TopicPartition(f"{app_id}-convert-repartition", p) for p in range(PARTITIONS)]
    config = Config(application_id=app_id, bootstrap_servers=bootstrap, commit_interval_ms=500, log_level="WARNING")
    async with app_running(topology, config, tasks) as run:
        app = run.app
        started = time.perf_counter()
        tracker = app.acks.tracker
        await run.until(lambda: all((tracker.begun_until(tp) or 0) >= e for tp, e in want.items()), 0.002)
        if pair is not None:  # ... and every payment through the repartition topic (one record each)
            payments = sum(e for tp, e in ends.items() if tp.topic == pair[1])
            await run.until(lambda: sum(tracker.begun_until(tp) or 0 for tp in repartition) >= payments, 0.002)
            want.update({tp: tracker.begun_until(tp) or 0 for tp in repartition})
        # every input processed: commit now (as the passthrough does after its last batch) rather
        # than idle until the next commit_interval_ms tick, which would time the interval, not the work
        async with app.lock:
            await app.committer.commit_locked("bench-end")
        while any(app.committer.committed.get(tp, 0) < e for tp, e in want.items()):
            await run.check()
            await asyncio.sleep(0.002)
            async with app.lock:
                await app.committer.commit_locked("bench-end")
        return time.perf_counter() - started


async def _task_only(bootstrap: str, source: str, ends: dict[Any, int]) -> float:
    """The sessions Task alone over the same records (read first, untimed): the processing cost
    without any Kafka I/O, i.e. what the daemon could reach with free I/O."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streamproc.engine.task import Task
    from topologies import sessions

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    by_partition: dict[int, list[Any]] = {tp.partition: [] for tp in ends}
    try:
        consumer.assign([TopicPartition(source, p) for p in by_partition])
        await consumer.seek_to_beginning()
        while sum(len(v) for v in by_partition.values()) < sum(ends.values()):
            for tp, records in (await consumer.getmany(timeout_ms=200, max_records=10_000)).items():
                by_partition[tp.partition].extend(records)
    finally:
        await consumer.stop()
    # as in the daemon: the records read up front are not the topology's garbage (frozen, never
    # scanned by the collector) and the collector runs with the daemon's default gc_threshold
    from streamproc.config import settings

    gc.freeze()
    gc.set_threshold(next(s.default for s in settings() if s.name == "gc_threshold"), *gc.get_threshold()[1:])
    topology = sessions.build(input=source)
    started = time.perf_counter()
    for p, records in by_partition.items():
        task = Task(topology, 0, p, "bench-task")
        for i in range(0, len(records), 5000):
            task.process(source, p, records[i:i + 5000])
            task.drain_outputs()
        task.drain_changelogs()
        task.close()
    return time.perf_counter() - started


def _child(phase: str, args: tuple[Any, ...], out: Any) -> None:
    if phase == "daemon-source":  # the same daemon with the hot path run from its Python source
        os.environ["STREAMPROC_PURE_PYTHON"] = "1"
    if phase.startswith("baseline="):  # the daemon with another checkout's streamproc package
        sys.path.insert(0, phase.partition("=")[2])
        import streamproc

        sys.path.pop(0)
        assert Path(streamproc.__file__).parent.parent == Path(phase.partition("=")[2]).resolve(), streamproc.__file__
        phase = "daemon"
    if phase != "passthrough":  # imported before the CPU is measured, whichever checkout (as the baseline's is)
        import streamproc.config
        import streamproc.runtime.app
        import topologies.currency
        import topologies.sessions  # noqa: F401
    import uvloop

    fn = {"passthrough": _passthrough, "daemon": _daemon, "daemon-source": _daemon, "task": _task_only}[phase]
    out.put(measured(lambda: {"elapsed": uvloop.run(fn(*args))}))


def run_phase(phase: str, bootstrap: str, source: str, ends: dict[Any, int]) -> dict[str, float]:
    return run_in_child(_child, phase, (bootstrap, source, ends))


def _function(frame: str) -> str:
    """``name (path:line)`` -> ``name (path)``: inclusive time per function, not per line."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def profile_daemon(bootstrap: str, source: str, ends: dict[Any, int], top: int = 15) -> None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists():
        print("py-spy not installed: skipping the profile (pip install py-spy)")
        return
    raw = Path(tempfile.mkdtemp()) / "daemon.folded"
    # compiled modules run no Python frames: py-spy then also reads the native stacks (their symbols)
    native = ["--native"] if "compiled" in _native_status().values() else []
    cmd = [pyspy, "record", "--format", "raw", "--rate", "200", "--output", str(raw), *native, "--",
           sys.executable, "-m", __spec__.name, "--phase-daemon", bootstrap, source, _ends_arg(ends)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    self_samples: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "importlib._bootstrap" in stack:  # start-up: imports
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_samples[frames[-1]] += n
        for f in {_function(f) for f in frames}:
            if "streamproc" in f or "topologies" in f:
                inclusive[f] += n
    print(f"\npy-spy profile of the daemon phase ({total} samples, imports left out; {raw})\n"
          "top frames by self samples:")
    for frame, n in self_samples.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame}")
    print("top streamproc functions by inclusive samples:")
    for frame, n in inclusive.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame}")


def _ends_arg(ends: dict[Any, int]) -> str:
    return json.dumps({f"{tp.topic}:{tp.partition}": e for tp, e in ends.items()})


def _ends_from(arg: str) -> dict[Any, int]:
    from aiokafka import TopicPartition

    return {TopicPartition(k.rpartition(":")[0], int(k.rpartition(":")[2])): v for k, v in json.loads(arg).items()}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--phase-daemon":  # the profiled child
        import uvloop

        uvloop.run(_daemon(sys.argv[2], sys.argv[3], _ends_from(sys.argv[4])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--topology", choices=("sessions", "currency"), default="sessions",
                    help="sessions (default) or currency (the versioned stream-table join)")
    ap.add_argument("--users", type=str, default="5000",
                    help="distinct users, or a comma-separated list to run one after another (5000: "
                         "~1.4 clicks per session, nearly one output per input, the heavy case; 2000: "
                         "~2.5; 1000: ~6; 500: ~30)")
    ap.add_argument("--sweep", action="store_true", help="the same as --users 5000,2000,1000,500")
    ap.add_argument("--quick", action="store_true", help="30 000 records (a smoke run)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--profile", action="store_true", help="profile the daemon phase with py-spy")
    ap.add_argument("--no-source", action="store_true", help="skip the phase with the hot path run from source")
    ap.add_argument("--baseline", metavar="DIR", help="also run the daemon with the streamproc package of the "
                    "checkout DIR (compiled there), interleaved with the other phases")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run passthrough and daemon alternately this many times and report the best of each")
    args = ap.parse_args()
    if args.quick:
        args.records = 30_000
    if args.topology == "currency":
        shapes = [0]
    else:
        shapes = [5000, 2000, 1000, 500] if args.sweep else [int(u) for u in args.users.split(",")]
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    summary = []
    with broker(args.bootstrap) as bootstrap:
        for users in shapes:
            summary.append(run_shape(bootstrap, args.records, users, args.profile, args.repeat,
                                     baseline=baseline, source_phase=not args.no_source))
        if len(summary) > 1:
            print(f"\n{'users':>6} {'clicks/session':>15} {'passthrough rec/s':>18} {'daemon rec/s':>13} "
                  f"{'ratio':>6} {'daemon CPU us/rec':>18}")
            for users, cps, base_rate, daemon_rate, cpu_us, ratio in summary:
                print(f"{users:6} {cps:15.1f} {base_rate:18,.0f} {daemon_rate:13,.0f} "
                      f"{ratio:6.2f} {cpu_us:18.1f}")


def clicks_per_session(n: int, users: int) -> float:
    """Clicks per session of the generated input (same generator: a click opens a new session when
    the user's previous one is more than the topology's gap earlier)."""
    from topologies import sessions as topo

    rng = random.Random(1)
    last: dict[int, int] = {}
    opened = 0
    for i in range(n):
        user = rng.randrange(users)
        rng.randrange(100)  # the page draw of _produce_input, to stay in step with it
        t = i * 1_000
        if user not in last or t - last[user] > topo.GAP_MS:
            opened += 1
        last[user] = t
    return n / max(1, opened)


def _best(runs: list[dict[str, float]]) -> dict[str, float]:
    """The fastest of repeated runs of one phase (least disturbed by other load on the machine)."""
    return min(runs, key=lambda r: r["elapsed"])


def run_shape(bootstrap: str, records: int, users: int, profile: bool, repeat: int = 1,
              baseline: str | None = None, source_phase: bool = True) -> tuple[int, float, float, float, float, float]:
    """One input (``users`` 0: the currency join's), every phase ``repeat`` times, interleaved."""
    t = time.perf_counter()
    if users:
        source = f"bench-clicks-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topics(bootstrap, [source], PARTITIONS))
        ends = asyncio.run(_produce_input(bootstrap, source, records, users))
        cps = clicks_per_session(records, users)
        n = sum(ends.values())
        what = "sessions topology"
        print(f"\ninput: {n} records of {users} users ({cps:.1f} clicks per session) on {PARTITIONS} partitions "
              f"of {source} (produced in {time.perf_counter() - t:.1f} s); broker {bootstrap}")
    else:
        tag = uuid.uuid4().hex[:8]
        rates, payments = f"bench-rates-{tag}", f"bench-payments-{tag}"
        asyncio.run(create_topics(bootstrap, [rates, payments], PARTITIONS))
        ends = asyncio.run(_produce_currency(bootstrap, rates, payments, records))
        source = f"{rates},{payments}"
        cps = 0.0
        n = sum(e for tp, e in ends.items() if tp.topic == payments)
        what = "currency join"
        print(f"\ninput: {n} payments and {sum(ends.values()) - n} rates on {PARTITIONS} partitions of {payments}, "
              f"{rates} (produced in {time.perf_counter() - t:.1f} s); broker {bootstrap}; records/s and CPU per "
              f"record count the payments")
    compiled = "compiled" in _native_status().values()
    base_phase = f"baseline={baseline}" if baseline else None
    phases = ["passthrough", "daemon", *([base_phase] if base_phase else []),
              *(["daemon-source"] if compiled and source_phase else [])]
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in phases}
    for _ in range(repeat):  # alternate, so slow spells of a shared machine hit every phase alike
        for phase in phases:
            runs[phase].append(run_phase(phase, bootstrap, source, ends))
    task = run_phase("task", bootstrap, source, ends) if users else None
    base, daemon = _best(runs["passthrough"]), _best(runs["daemon"])
    rows = [("aiokafka passthrough (ceiling)", base), (f"daemon, {what}", daemon)]
    if base_phase:
        rows.append(("daemon, baseline checkout", _best(runs[base_phase])))
    if "daemon-source" in runs:
        rows.append(("daemon, hot path from source", _best(runs["daemon-source"])))
    if task is not None:
        rows.append(("sessions Task alone, no Kafka", task))
    print(f"{'phase (best of ' + str(repeat) + ')':34} {'records/s':>12} {'seconds':>9} {'CPU s':>8} "
          f"{'CPU us/rec':>11} {'peak RSS MB':>12}")
    for name, r in rows:
        print(f"{name:34} {n / r['elapsed']:12,.0f} {r['elapsed']:9.2f} {r['cpu']:8.2f} {1e6 * r['cpu'] / n:11.2f} "
              f"{r['rss_mb']:12.1f}")
    ratio = base["elapsed"] / daemon["elapsed"]
    pairs = [b["elapsed"] / d["elapsed"] for b, d in zip(runs["passthrough"], runs["daemon"])]
    print(f"ratio daemon / passthrough: {ratio:.2f} best vs best (target >= 0.7); per run, in order: "
          f"{', '.join(f'{r:.2f}' for r in pairs)}")
    if base_phase:
        old = _best(runs[base_phase])
        old_pairs = [b["elapsed"] / d["elapsed"] for b, d in zip(runs["passthrough"], runs[base_phase])]
        print(f"ratio baseline / passthrough: {base['elapsed'] / old['elapsed']:.2f} best vs best; per run, in order: "
              f"{', '.join(f'{r:.2f}' for r in old_pairs)}")
        print(f"CPU per record: daemon {1e6 * daemon['cpu'] / n:.2f} us, baseline {1e6 * old['cpu'] / n:.2f} us "
              f"(medians {1e6 * _median(runs['daemon'], 'cpu') / n:.2f} / {1e6 * _median(runs[base_phase], 'cpu') / n:.2f})")
    if "daemon-source" in runs:
        source_best = _best(runs["daemon-source"])
        print(f"compiled hot path / Python source: {source_best['elapsed'] / daemon['elapsed']:.2f}x records/s "
              f"(source alone: ratio {base['elapsed'] / source_best['elapsed']:.2f})")
    if task is not None:
        print(f"daemon / Task alone: {task['elapsed'] / daemon['elapsed']:.2f} (share of the daemon's time spent "
              f"in the topology itself)")
    print(f"CPU per record: passthrough {1e6 * base['cpu'] / n:.2f} us, daemon {1e6 * daemon['cpu'] / n:.2f} us")
    if profile:
        profile_daemon(bootstrap, source, ends)
    return users, cps, n / base["elapsed"], n / daemon["elapsed"], 1e6 * daemon["cpu"] / n, ratio


def _median(runs: list[dict[str, float]], key: str) -> float:
    values = sorted(r[key] for r in runs)
    return values[len(values) // 2]


def _native_status() -> dict[str, str]:
    from streamproc import _native

    return _native.status()


if __name__ == "__main__":
    main()
