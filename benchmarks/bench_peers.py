"""streamproc side by side with Kafka Streams, Bytewax, Quix Streams, faust-streaming and a raw
aiokafka passthrough.

One broker, one input, the peers one after another (each in its own process; Bytewax, Quix and
faust in their own venvs with pinned versions, built on first use under
``~/.cache/streamproc/peer-venvs``; the Kafka Streams peer built with ``mvn`` on first use under
``~/.cache/streamproc/kstreams-peer``, ``peers/jvm.py``):

* **passthrough** (the ceiling): aiokafka consume -> produce, no deserialisation, no state;
* **streamproc**: ``streamproc run`` of ``topologies.sessions`` (session-window count, gap 30 min,
  grace 5 min, change-logged in-memory store, emit on window close);
* **kstreams** / **kstreams-nocache**: the same topology in Java on kafka-streams 4.3.1
  (``peers/kstreams/``: in-memory session store, emit on window close, one stream thread), with the
  default record cache and with ``statestore.cache.max.bytes=0``; **kstreams-rocksdb**: the same
  with the store Kafka Streams picks itself for emit-on-close (RocksDB, indexed by session end);
* **bytewax**: Bytewax 0.21.1, Kafka source (``tail=False``: stops at the end of each partition), ``fold_window`` with a
  ``SessionWindower`` on an event-time clock kept per user, Kafka sink (``peers/bytewax_app.py``);
* **quix**: ``session_window(gap, grace).count().final(closing_strategy="partition")`` (the same
  semantics as streamproc); **quix-key**: the same with Quix's default ``closing_strategy="key"``;
* **faust**: faust has no session windows; a change-logged ``Table`` holds each user's open session,
  closed by the user's next click after the gap (no out-of-order merging).

Phases:

1. **throughput**, once per size of ``--records N[,N...]``: N clicks of ``--users`` users on
   ``--partitions`` partitions, plus one end-of-input marker per partition that closes every
   session. Each peer consumes all of it in its own consumer group. The clock runs from "the group
   is Stable" to "every input offset is committed and the output holds all the expected records"
   (polled every 50 ms); for Bytewax, which has no consumer group, from its first record (it
   writes the time to a file) to "the output holds all the expected records". CPU seconds are the peer
   process's over that window (``/proc``); peak RSS is its lifetime maximum. The output is then read
   back and compared, session by session, with what that peer's own rules must produce from the
   input; a peer whose output is wrong gets no figure. ``--limit PEER=N`` gives a peer too slow for
   the whole input (Quix with partition closing: default N = 60,000) the first N clicks instead;
   ``--max-records PEER=N`` leaves a peer out at sizes above N.
2. **profile** (``--profile PEERS``, default streamproc; ``--no-profile``): the peer again over the
   first ``--profile-records`` clicks under ``py-spy record`` attached to it (top frames by self
   samples, top functions of the peer's own package by inclusive samples).
3. **latency**: each peer on a fresh topic fed at each of ``--rate`` records/s (the first one below
   every peer's saturation) for ``--latency-seconds``, event time = produce time, gap
   ``--latency-gap-ms``. A session's latency is the time from producing the input click that made it
   due under that peer's close rule (``peers/common.py``: ``TriggerIndex``) to reading its output
   record; p50/p99 over all sessions that a real click closed. Not for Bytewax (it reads its input
   only until it reaches the end of each partition, then stops).
4. **in-process**: ``bench_task_path.py``'s sessions ``Task`` path vs a hand-written sessionizer,
   ``--inproc-records`` records, no Kafka.

Writes ``results.json``, ``results.md`` and ``bench-peers.png`` into ``--out`` (default
``bench-results/peers``); the chart only when matplotlib is installed (otherwise one line says it
was skipped: ``benchmarks/charts.py``). ``--publish`` also copies the report and chart into
``docs/benchmarks.md`` and ``docs/img/``. ``--quick`` = small sizes (about 3 minutes). Broker: ``--bootstrap`` or
``$KAFKA_BOOTSTRAP_SERVERS``, else a local one (``scripts/kafka/localkafka.py``), stopped at the end.

Run from the repository root: ``python -m benchmarks.bench_peers [--quick] [--peers passthrough,streamproc]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.harness import broker
from benchmarks.peers import common, jvm, kafka_io, procs, report, venvs

REPO = Path(__file__).resolve().parents[1]

COMPUTES = {
    "passthrough": "consume → produce, no state",
    "streamproc": "session-window count (merging, grace), emit on close",
    "kstreams": "Kafka Streams: the same topology, in-memory session store, default record cache",
    "kstreams-nocache": "Kafka Streams: the same, record cache off (statestore.cache.max.bytes=0)",
    "kstreams-rocksdb": "Kafka Streams: the same with its default store for emit-on-close (RocksDB, by end time)",
    "bytewax": "Bytewax fold_window + SessionWindower (per-user watermark; rest closed at end of input)",
    "quix": "session_window count, .final(), closing=partition (merging, RocksDB)",
    "quix-key": "same, Quix's default closing=key (a silent user's last session never closes)",
    "faust": "per-user session in a Table (no merging)",
}
TARGETS = {"quix": 2.0, "quix-key": 2.0, "faust": 5.0}
#: Peers without a consumer group (the harness watches their output instead, see ``watch_output``).
GROUPLESS = frozenset({"bytewax"})
#: Peers without a latency run: Bytewax (``tail=False``) stops at the first end of partition it reaches.
NO_LATENCY = frozenset({"bytewax"})


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _partitioner() -> Any:
    from streamproc.engine.partitioning import partition_for

    return partition_for


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- one throughput run ------------------------------------------------------------------------


def _read_ready(path: Path) -> tuple[float, float] | None:
    """``(wall time, process CPU s)`` a group-less peer wrote at its first record, or None yet."""
    try:
        wall, cpu = path.read_text().split()
        return float(wall), float(cpu)
    except (OSError, ValueError):
        return None


async def _run_and_watch(run: procs.PeerRun, ends: dict[int, int], min_outputs: int, log: Path,
                         timeout: float, profile_out: Path | None = None) -> dict[str, Any]:
    proc = procs.PeerProcess(run, log)
    marks: dict[str, Any] = {}
    ready_file = procs.ready_file(run) if run.peer in GROUPLESS else None

    def on_ready() -> None:
        got = _read_ready(ready_file) if ready_file is not None else None
        marks["cpu0"] = got[1] if got is not None else proc.cpu_seconds()
        if profile_out is not None:
            marks["spy"] = procs.PySpy(proc.pid, profile_out)

    progress = kafka_io.Progress()
    try:
        if ready_file is not None:
            def ready() -> float | None:
                got = _read_ready(ready_file)
                return got[0] if got is not None else None

            await kafka_io.watch_output(run.bootstrap, run.sink, run.partitions, min_outputs, progress,
                                        alive=proc.alive, ready=ready, on_ready=on_ready, timeout=timeout)
        else:
            await kafka_io.watch_group(run.bootstrap, run.group, run.source, ends, run.sink, run.partitions,
                                       min_outputs, progress, alive=proc.alive, on_ready=on_ready, timeout=timeout)
        try:
            cpu1 = proc.cpu_seconds()
        except OSError:  # already gone: its totals come from wait4 below
            cpu1 = None
        folded = marks["spy"].stop() if "spy" in marks else None
    except BaseException as exc:
        if "spy" in marks:
            marks["spy"].stop()
        proc.stop(timeout=20)
        raise RuntimeError(f"{run.peer} failed: {type(exc).__name__}: {exc}; log tail:\n{proc.tail()}") from exc
    proc.stop()
    assert progress.ready_at is not None and progress.done_at is not None
    ru = proc.rusage
    if cpu1 is None:
        cpu1 = ru.ru_utime + ru.ru_stime
    return {"seconds": progress.done_at - progress.ready_at, "cpu_s": cpu1 - marks["cpu0"],
            "second_half_records_per_s": progress.second_half_rate(),
            "cpu_total_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "exit_code": proc.returncode, "folded": folded}


async def throughput(peer: str, bootstrap: str, source: str, ends: dict[int, int], clicks: list[common.Click],
                     args: argparse.Namespace, workdir: Path, profile: bool = False) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    sink = f"peers-{peer}-out-{tag}"
    await kafka_io.create_topic(bootstrap, sink, args.partitions)
    expected = common.expected_sessions(peer, clicks, args.gap_ms, args.grace_ms)
    run = procs.PeerRun(peer, bootstrap, f"peers-{peer}-{tag}", source, sink, args.gap_ms, args.grace_ms,
                        args.partitions, workdir)
    n = sum(ends.values())
    timeout = 120 + n / 100  # generous: a peer at 100 records/s still finishes
    r = await _run_and_watch(run, ends, len(expected), workdir / f"{peer}-{tag}{'-profile' if profile else ''}.log",
                             timeout, workdir / f"{peer}-{tag}.folded" if profile else None)
    got = [common.parse_output(peer, k, v, ts) for k, v, ts in await kafka_io.read_topic(bootstrap, sink,
                                                                                        args.partitions)]
    check = common.check_sessions(got, expected)
    r.update(records=n, records_per_s=n / r["seconds"] if check.ok else None, unchecked_records_per_s=n / r["seconds"],
             cpu_us_per_record=1e6 * r["cpu_s"] / n, check_ok=check.ok, check=check.message)
    return r


def _throughput_phase(size: int, peers: list[str], rows: dict[str, dict[str, Any]], limits: dict[str, int],
                      max_records: dict[str, int], bootstrap: str, args: argparse.Namespace,
                      workdir: Path) -> tuple[str, list[common.Click]]:
    """``size`` clicks (+ the markers) on a fresh topic, then each peer's throughput run over them
    (or over the first ``limits[peer]`` clicks; not at all above ``max_records[peer]``), results
    into ``rows``. Returns the topic and the clicks."""
    source = f"peers-clicks-{uuid.uuid4().hex[:6]}"
    asyncio.run(kafka_io.create_topic(bootstrap, source, args.partitions))
    clicks = common.generate_clicks(size, args.users, args.partitions, _partitioner())
    clicks += common.flush_clicks(args.partitions, common.marker_ts(max(c.ts for c in clicks), args.gap_ms,
                                                                    args.grace_ms))
    t = time.perf_counter()
    asyncio.run(kafka_io.produce_all(bootstrap, source, clicks))
    ends = asyncio.run(kafka_io.end_offsets(bootstrap, source, args.partitions))
    _log(f"input: {sum(ends.values()):,} records on {source} ({time.perf_counter() - t:.1f} s); broker {bootstrap}")
    for peer in peers:
        if size > max_records.get(peer, size):
            rows[peer].update(skipped=True, check=f"not run at {size:,} clicks (--max-records {peer}="
                                                  f"{max_records[peer]})")
            _log(f"throughput: {peer} not run at {size:,} clicks (--max-records)")
            continue
        _log(f"throughput: {peer}, {size:,} clicks (load {_load()})")
        try:
            p_source, p_ends, p_clicks = source, ends, clicks
            if limits.get(peer, size) < size:
                # a separate topic holding the first N clicks of the same input (+ the markers)
                p_source = f"{source}-first{limits[peer]}"
                p_clicks = clicks[:limits[peer]] + clicks[-args.partitions:]
                asyncio.run(kafka_io.create_topic(bootstrap, p_source, args.partitions))
                asyncio.run(kafka_io.produce_all(bootstrap, p_source, p_clicks))
                p_ends = asyncio.run(kafka_io.end_offsets(bootstrap, p_source, args.partitions))
            r = asyncio.run(throughput(peer, bootstrap, p_source, p_ends, p_clicks, args, workdir))
            if p_source != source:
                r["check"] += f" (first {limits[peer]:,} clicks only)"
                r["limited_to"] = limits[peer]
            r.pop("folded", None)
            rows[peer].update(r, load=_load())
            fig = f"{r['records_per_s']:,.0f} records/s" if r["records_per_s"] else "NO FIGURE"
            half = r["second_half_records_per_s"]
            _log(f"  {peer}: {fig}, {r['seconds']:.1f} s, CPU {r['cpu_s']:.1f} s, RSS {r['rss_mb']:.0f} MB, "
                 f"second half {f'{half:,.0f}' if half else 'n/a'} records/s; check {r['check']}")
        except Exception as exc:  # noqa: BLE001 - one peer's failure is its row's, the others still run
            rows[peer].update(check=f"run failed: {str(exc).splitlines()[0][:160]}", error=str(exc))
            _log(f"  {peer} FAILED: {exc}")
    return source, clicks


# ---- one latency run ---------------------------------------------------------------------------


async def latency(peer: str, bootstrap: str, rate: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    source, sink = f"peers-lat-{peer}-in-{tag}", f"peers-lat-{peer}-out-{tag}"
    for t in (source, sink):
        await kafka_io.create_topic(bootstrap, t, args.partitions)
    gap, grace = args.latency_gap_ms, args.latency_grace_ms
    run = procs.PeerRun(peer, bootstrap, f"peers-lat-{peer}-{tag}", source, sink, gap, grace, args.partitions,
                        workdir)
    proc = procs.PeerProcess(run, workdir / f"{peer}-latency-{tag}.log")
    tail = kafka_io.OutputTail(bootstrap, sink, args.partitions)
    try:
        progress = kafka_io.Progress()
        # ready = the group is Stable; give the peer a moment to finish restoring its (empty) state
        await kafka_io.watch_group(bootstrap, run.group, source, {}, sink, args.partitions, 0, progress,
                                   alive=proc.alive, timeout=120)
        await asyncio.sleep(2.0)
        await tail.start()
        clicks = await kafka_io.produce_at_rate(bootstrap, source, rate, args.latency_seconds,
                                                args.users, args.partitions, _partitioner())
        flush = common.flush_clicks(args.partitions, common.marker_ts(max(c.ts for c in clicks), gap, grace))
        await kafka_io.produce_flush(bootstrap, source, flush)
        all_clicks = clicks + flush
        expected = common.expected_sessions(peer, all_clicks, gap, grace)
        deadline = time.monotonic() + 60 + args.latency_seconds
        while len(tail.records) < len(expected) and time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"{peer} exited during the latency run; log tail:\n{proc.tail()}")
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # let a duplicate, if any, show up
    finally:
        if tail._task is not None:
            await tail.stop()
        proc.stop(timeout=30)
    got = [(common.parse_output(peer, k, v, ts), read_ms) for k, v, ts, read_ms in tail.records]
    check = common.check_sessions([s for s, _ in got], expected)
    index = common.TriggerIndex(clicks, gap, grace)
    lat: list[float] = []
    negative = untriggered = 0
    for s, read_ms in got:
        if common.is_flush(s.user):
            continue
        trig = index.trigger_ms(peer, s)
        if trig is None:
            untriggered += 1
            continue
        d = read_ms - trig
        negative += d < -5  # read before its trigger was produced: the close rule is wrong
        lat.append(d)
    summary = common.latency_summary(lat)
    ok = check.ok and negative == 0 and summary["n"] > 0
    return {"latency": summary if ok else None, "latency_unchecked": summary, "latency_check": check.message,
            "latency_negative": negative, "latency_closed_by_marker": untriggered, "latency_records": len(clicks),
            "latency_ok": ok}


# ---- the whole run -----------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    try:
        import aiokafka

        out["aiokafka (streamproc, passthrough)"] = aiokafka.__version__
    except ImportError:
        pass
    for name, req in venvs.REQUIREMENTS.items():
        for line in req.read_text().splitlines():
            for pkg in ("quixstreams", "confluent-kafka", "faust-streaming", "aiokafka", "uvloop", "orjson",
                        "rocksdict", "bytewax", "py-spy"):
                if line.lower().startswith(pkg + "=="):
                    out[f"{pkg} ({name} venv)"] = line.split("==")[1]
    out["kafka-streams"] = jvm.kafka_streams_version()
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
        out["java"] = java.splitlines()[0].split('"')[1] if '"' in java else java.strip()[:40]
    except (OSError, IndexError):
        pass
    return out


def _machine() -> str:
    """``N cores, arch, CPU model, RAM`` of this machine (Linux ``/proc``; what is unknown is left out)."""
    parts = [f"{os.cpu_count()} cores", platform.machine()]
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                parts.append(line.split(":", 1)[1].strip())
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:", 1)[1].split()[0])
        parts.append(f"{kb / 1024 / 1024:.0f} GiB RAM")
    return ", ".join(parts)


def _inproc(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.peers.inproc", "--records",
           str(args.inproc_records), "--users", str(args.users), "--repeat", str(args.inproc_repeat)]
    p = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout)[-800:]}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (about 3 minutes)")
    ap.add_argument("--records", metavar="N[,N...]",
                    help="throughput input records, one throughput run per size (full 1,000,000; quick 20,000)")
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--gap-ms", type=int, default=30 * 60_000)
    ap.add_argument("--grace-ms", type=int, default=5 * 60_000)
    ap.add_argument("--peers", default=",".join(common.PEERS), help=f"comma list of {','.join(common.PEERS)}")
    ap.add_argument("--limit", action="append", default=[], metavar="PEER=N",
                    help="throughput of PEER over the first N clicks only (default quix=60000, quick quix=5000)")
    ap.add_argument("--max-records", action="append", default=[], metavar="PEER=N",
                    help="run PEER's throughput only at sizes of at most N clicks (a slow peer at a large size)")
    ap.add_argument("--rate", dest="latency_rates", metavar="R[,R...]",
                    help="latency input records/s; the first is the table's (below every peer's saturation), "
                         "others are reported next to it (full 200,1000; quick 200)")
    ap.add_argument("--latency-seconds", type=int, help="latency run length (full 30, quick 6)")
    ap.add_argument("--latency-gap-ms", type=int, default=1000)
    ap.add_argument("--latency-grace-ms", type=int, default=0)
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--profile", default="streamproc", metavar="PEERS",
                    help="comma list of peers to profile with py-spy (default streamproc)")
    ap.add_argument("--profile-records", type=int, help="clicks of a profiled run (full 300,000; quick 20,000)")
    ap.add_argument("--no-inproc", action="store_true")
    ap.add_argument("--inproc-records", type=int, help="in-process records (full 1,000,000; quick 100,000)")
    ap.add_argument("--inproc-repeat", type=int, help="in-process best of (full 3, quick 1)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    ap.add_argument("--out", type=Path, default=REPO / "bench-results" / "peers")
    ap.add_argument("--publish", action="store_true", help="copy the report and chart into docs/")
    ap.add_argument("--setup-only", action="store_true", help="build the peer venvs and the Kafka Streams peer, exit")
    args = ap.parse_args(argv)
    q = args.quick
    try:
        sizes = [int(n.replace("_", "")) for n in (args.records or ("20000" if q else "1000000")).split(",")]
    except ValueError:
        ap.error(f"--records: expected N or N,N,..., got {args.records!r}")
    if any(n <= 0 for n in sizes):
        ap.error(f"--records: sizes must be > 0, got {sizes}")
    args.records = sizes[0]
    try:
        rates = [int(r) for r in (args.latency_rates or ("200" if q else "200,1000")).split(",")]
    except ValueError:
        ap.error(f"--rate: expected records/s like 200 or 200,1000, got {args.latency_rates!r}")
    if any(r <= 0 for r in rates):
        ap.error(f"--rate: rates must be > 0, got {rates}")
    args.latency_rate, args.latency_rates = rates[0], rates
    args.latency_seconds = args.latency_seconds or (6 if q else 30)
    args.inproc_records = args.inproc_records or (100_000 if q else 1_000_000)
    args.inproc_repeat = args.inproc_repeat or (1 if q else 3)
    args.profile_records = min(args.records, args.profile_records or (20_000 if q else 300_000))
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    # Quix with closing=partition sweeps every key of the partition whenever a session may close
    # (O(keys) per record, several ms here): it gets the first N clicks of the same input. Sessions
    # start closing after ~20k clicks (2*gap + grace of event time), so N must be well past that.
    limits: dict[str, int] = {"quix": 5_000 if q else 60_000}
    for item in args.limit:
        name, _, n = item.partition("=")
        if name not in common.PEERS or not n.isdigit():
            ap.error(f"--limit: expected PEER=N with PEER in {', '.join(common.PEERS)}, got {item!r}")
        limits[name] = int(n)
    max_records: dict[str, int] = {}
    for item in args.max_records:
        name, _, n = item.partition("=")
        if name not in common.PEERS or not n.isdigit():
            ap.error(f"--max-records: expected PEER=N with PEER in {', '.join(common.PEERS)}, got {item!r}")
        max_records[name] = int(n)
    for p in peers:
        if p not in common.PEERS:
            ap.error(f"--peers: unknown peer {p!r}; expected some of {', '.join(common.PEERS)}")

    started = time.time()
    needed = {"quix" if p.startswith("quix") else p for p in peers} & {"quix", "faust", "bytewax"}
    for name in sorted(needed) + ([] if args.no_profile else ["tools"]):
        venvs.ensure(name)
    if any(p.startswith("kstreams") for p in peers):
        jvm.ensure()
    if args.setup_only:
        return 0
    env = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)), "quick": q,
           "machine": _machine(), "load_before": _load(),
           "records": args.records, "sizes": sizes, "users": args.users, "partitions": args.partitions, "gap_ms": args.gap_ms,
           "grace_ms": args.grace_ms, "latency_rate": args.latency_rate, "latency_rates": args.latency_rates,
           "latency_seconds": args.latency_seconds,
           "latency_gap_ms": args.latency_gap_ms, "latency_grace_ms": args.latency_grace_ms,
           "versions": _versions(),
           "command": "python -m benchmarks.bench_peers " + " ".join(argv if argv is not None else sys.argv[1:])}
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    rows: dict[str, dict[str, Any]] = {p: {"peer": p, "computes": COMPUTES[p]} for p in peers}
    results: dict[str, Any] = {"env": env}
    stack = contextlib.ExitStack()
    try:
        if not args.bootstrap:
            _log("starting a local broker")
        bootstrap = stack.enter_context(broker(args.bootstrap))
        env["broker"] = bootstrap

        # 1. throughput, once per size; the profile and latency phases use the first size's input
        size_rows: list[dict[str, dict[str, Any]]] = []
        source, clicks = "", []
        for size in sizes:
            s_rows = rows if not size_rows else {p: {"peer": p, "computes": COMPUTES[p]} for p in peers}
            size_rows.append(s_rows)
            s_source, s_clicks = _throughput_phase(size, peers, s_rows, limits, max_records, bootstrap, args, workdir)
            if len(size_rows) == 1:
                source, clicks = s_source, s_clicks

        # 2. profiles (the first --profile-records clicks of the same input)
        results["profiles"] = {}
        for peer in [] if args.no_profile else [p for p in args.profile.split(",") if p in peers]:
            _log(f"profile: {peer} under py-spy, first {args.profile_records:,} clicks")
            try:
                p_source = f"{source}-profile-{peer}"
                p_clicks = clicks[:args.profile_records] + clicks[-args.partitions:]
                asyncio.run(kafka_io.create_topic(bootstrap, p_source, args.partitions))
                asyncio.run(kafka_io.produce_all(bootstrap, p_source, p_clicks))
                p_ends = asyncio.run(kafka_io.end_offsets(bootstrap, p_source, args.partitions))
                r = asyncio.run(throughput(peer, bootstrap, p_source, p_ends, p_clicks, args, workdir, profile=True))
                include = {"streamproc": ("streamproc", "topologies"), "faust": ("faust/", "mode/"),
                           "quix": ("quixstreams",), "quix-key": ("quixstreams",)}.get(peer, ("peers",))
                prof = common.fold_profile(r["folded"] or "", include=include,
                                           exclude=("<module>", "streamproc/cli.py", "faust_app.py", "quix_app.py"))
                prof.update(rate=100, records=len(p_clicks), records_per_s_under_profiler=r["unchecked_records_per_s"],
                            cpu_s=r["cpu_s"], seconds=r["seconds"])
                results["profiles"][peer] = prof
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{peer}.folded").write_text(r["folded"] or "")
            except Exception as exc:  # noqa: BLE001 - reported in the profile's place
                results["profiles"][peer] = {"error": str(exc)}
                _log(f"  profile FAILED: {exc}")

        # 3. latency
        for rate in [] if args.no_latency else args.latency_rates:
            for peer in [p for p in peers if p not in NO_LATENCY]:
                _log(f"latency: {peer} at {rate}/s for {args.latency_seconds} s (load {_load()})")
                try:
                    r = asyncio.run(latency(peer, bootstrap, rate, args, workdir))
                    r["load"] = _load()
                    rows[peer].setdefault("latency_by_rate", {})[rate] = r
                    lat = r["latency"]
                    if lat and rate == args.latency_rate:
                        rows[peer].update(latency_p50_ms=lat["p50"], latency_p99_ms=lat["p99"])
                    _log(f"  {peer}: {r['latency_unchecked']} check {r['latency_check']}"
                         f"{'' if r['latency_ok'] else ' -> NO FIGURE'}")
                except Exception as exc:  # noqa: BLE001 - reported in the peer's latency cell
                    rows[peer].setdefault("latency_by_rate", {})[rate] = {"error": str(exc)}
                    _log(f"  {peer} latency FAILED: {exc}")

        # 4. in-process
        if not args.no_inproc:
            _log(f"in-process: {args.inproc_records:,} records (load {_load()})")
            results["inproc"] = _inproc(args)
            _log(f"  {results['inproc']}")
    finally:
        stack.close()
        if os.environ.get("BENCH_KEEP_LOGS"):
            _log(f"peer logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    for s_rows in size_rows:
        for r in s_rows.values():
            if r.get("skipped"):
                continue
            if not r.get("check_ok") and r.get("check") and not str(r["check"]).startswith(("FAILED", "run failed")):
                r["check"] = "FAILED: " + str(r["check"])
            r["streamproc_ratio"] = common.ratios(s_rows).get(r["peer"])
            r["passthrough_share"] = common.passthrough_shares(list(s_rows.values())).get(r["peer"])
    for peer in NO_LATENCY & set(rows):
        rows[peer]["latency_note"] = "not measured (no consumer group; stops at the end of its input)"
    results["targets"] = {p: {"ratio": rows[p]["streamproc_ratio"], "target": TARGETS[p],
                              "met": rows[p]["streamproc_ratio"] >= TARGETS[p]}
                          for p in TARGETS if p in rows and rows[p].get("streamproc_ratio")}
    env["load_after"] = _load()
    env["seconds"] = round(time.time() - started, 1)
    results["rows"] = list(rows.values())
    results["sizes"] = [{"records": n, "rows": list(r.values())} for n, r in zip(sizes, size_rows)]
    j, md, png = report.write(results, args.out)
    text = md.read_text()
    print("\n" + text)
    print(f"written: {j}, {md}{f', {png}' if png else ''} ({env['seconds']:.0f} s in all)")
    if args.publish:
        report.publish(text, png, REPO)
        print("published: docs/benchmarks.md" + (", docs/img/" + report.CHART_NAME if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
