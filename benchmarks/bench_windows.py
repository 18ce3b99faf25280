"""Records/s and peak memory of the time-window operators through the Task path (no Kafka).

The **task path** is what the daemon runs per batch, minus Kafka: ``Task.process`` over batches of
raw records (bytes key + JSON bytes value) -> source deserialisation -> operator -> sink
serialisation, then ``drain_outputs()`` and the change-logging drain of every store per batch.

Scenarios (each in a fresh Python process, so its peak RSS is its own):

- ``tumbling-count``: ``--records`` (default 1M) page views of ``--keys`` pages, ~4 ms apart with
  5% jittered back by up to 20 s, counted per page per 1-minute tumbling window (grace 30 s), both
  emit strategies. A hand-written floor (a dict per window, emitted when it closes) checks the
  emit-on-close output record by record and gives the cost of the least code with that output.
- ``join-<B>``: a windowed inner stream-stream join where about ``B`` records are buffered in the
  join window (default B = 1k and 100k): both streams alternate, 1 ms apart, so with
  ``JoinWindows.of_time_difference_with_no_grace(B)`` each side's buffer holds ~B/2 records; there
  are B keys, so each record joins ~1 record of the other side. ``--join-records`` records
  (default 1M). Also the left join (unmatched tracking) at the same sizes.
- ``stream-join-rule``: issue 20's benchmark, the stream-stream join rule against the processor it
  replaced, in the same run: the ``join-<B>`` workload (first ``--buffered`` size), inner and left
  join, through the current processor and through the one of commit ``1081bae`` (its source read
  with ``git show`` into a temporary module, with its buffer retention ``max(before, after) + grace
  + 1``). Both run from their Python source (the same footing); the current one also as installed
  (compiled when ``scripts/setup.sh`` compiled it). Prints records/s of each and the ratio
  new/old; it exits non-zero if the inner joins give a different number of outputs (the workload has
  no late or out-of-order records, so both rules give the same pairs; the left join's counts differ
  by the null results the new rule has not emitted yet when the input ends).

Prints records/s and µs/record (best of ``--repeat`` runs, CPU time of the scenario's process), the
outputs and changelog records, the RSS before processing (interpreter + input records) and the peak
RSS (outputs are counted, not kept, except the 66k emit-on-close records compared with the floor). It asserts no speed; it exits non-zero if the floor's output differs from the task's.

Usage: ``python -m benchmarks.bench_windows [--records N] [--join-records N] [--buffered 1000,100000]
[--repeat R] [--quick] [--only stream-join-rule]`` (``--quick``: 100k records, buffered 1k and 10k, one run).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import random
import resource
import sys
import time
from typing import Any

MIN = 60_000
clock = time.process_time


def rss_mb() -> float:
    """Current resident set size of this process (Linux /proc), in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- data -----------------------------------------------------------------------------------------

def view_records(n: int, keys: int, seed: int = 5) -> list[Any]:
    from streamproc.records import Record

    rng = random.Random(seed)
    values = [json.dumps({"user": f"u{i}", "ref": "search"}).encode() for i in range(20)]
    pages = [f"/page/{i:05d}".encode() for i in range(keys)]
    ts = 1_700_000_000_000
    out = []
    for offset in range(n):
        ts += rng.randint(0, 8)
        t = ts - rng.randint(0, 20_000) if rng.random() < 0.05 else ts
        out.append(Record(pages[rng.randrange(keys)], values[rng.randrange(20)], t, (), "views", 0, offset))
    return out


def join_records(n: int, buffered: int, seed: int = 9) -> list[Any]:
    """Alternating left/right records 1 ms apart over ``buffered`` keys."""
    from streamproc.records import Record

    rng = random.Random(seed)
    keys = [f"k{i:06d}".encode() for i in range(buffered)]
    value = b'{"v":1}'
    base = 1_700_000_000_000
    return [Record(keys[rng.randrange(buffered)], value, base + i, (), "left" if i % 2 == 0 else "right", 0, i // 2)
            for i in range(n)]


# -- topologies -----------------------------------------------------------------------------------

def count_topology(on_close: bool) -> Any:
    from streamproc import serde
    from streamproc.dsl import EmitStrategy, StreamsBuilder, TimeWindows

    b = StreamsBuilder()
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    (b.stream("views", key_serde=serde.STRING, value_serde=serde.JSON)
      .group_by_key()
      .windowed_by(TimeWindows.of_size_and_grace(MIN, 30_000))
      .count(name="views-per-minute", emit=emit)
      .to_stream()
      .map(lambda w, n: (w.key, {"page": w.key, "start": w.start, "views": n}))
      .to("counts", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def join_topology(diff: int, kind: str) -> Any:
    from streamproc import serde
    from streamproc.dsl import JoinWindows, StreamsBuilder

    b = StreamsBuilder()
    left = b.stream("left", key_serde=serde.STRING, value_serde=serde.JSON)
    right = b.stream("right", key_serde=serde.STRING, value_serde=serde.JSON)
    getattr(left, kind)(right, lambda a, c: [a, c], JoinWindows.of_time_difference_with_no_grace(diff),
                        name="j").to("joined", key_serde=serde.STRING, value_serde=serde.JSON)
    return b.build()


# -- runs -----------------------------------------------------------------------------------------

def run_task(topology: Any, records: list[Any], batch: int,
             keep: bool = False) -> tuple[float, list[tuple[Any, Any, int]] | int, int]:
    """``(CPU seconds, outputs (kept when ``keep``, else their count), changelog records drained)``
    through one Task."""
    from streamproc.engine.task import Task

    task = Task(topology, 0, 0, "bench")
    stores = list(task.stores.values())
    outputs: list[tuple[Any, Any, int]] = []
    count = changelog = 0
    gc.collect()
    start = clock()
    process, drain = task.process, task.drain_outputs
    i, n = 0, len(records)
    while i < n:                   # a batch is a run of records of one topic (as getmany gives them)
        topic = records[i].topic
        j = i + 1
        while j < n and j - i < batch and records[j].topic == topic:
            j += 1
        process(topic, 0, records[i:j])
        if keep:
            outputs += [(o.key, o.value, o.timestamp) for o in drain()]
        else:
            count += len(drain())
        for store in stores:
            changelog += len(store.drain())
        i = j
    elapsed = clock() - start
    task.close()
    return elapsed, (outputs if keep else count), changelog


def run_count_floor(records: list[Any], batch: int, size: int = MIN, grace: int = 30_000) -> tuple[float, list]:
    """The least code with the emit-on-close output: a dict per window start, emitted (in start, key
    order, timestamp end - 1) when stream time - grace reaches its end; late records dropped."""
    windows: dict[int, dict[str, int]] = {}
    outputs: list[tuple[Any, Any, int]] = []
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    loads = json.loads
    stream_time = -1
    last_close = -1
    gc.collect()
    start = clock()
    for i in range(0, len(records), batch):
        for r in records[i:i + batch]:
            page = r.key.decode()
            loads(r.value)
            ts = r.timestamp
            stream_time = max(stream_time, ts)
            close = stream_time - grace
            w = ts // size * size
            if w + size > close:
                counts = windows.get(w)
                if counts is None:
                    counts = windows[w] = {}
                counts[page] = counts.get(page, 0) + 1
            if close > last_close:
                for w in sorted(s for s in windows if s + size <= close):
                    for page, n in sorted(windows.pop(w).items()):
                        outputs.append((page.encode(), encode({"page": page, "start": w, "views": n}).encode(),
                                        w + size - 1))
                last_close = close
    return clock() - start, outputs


OLD_JOIN_COMMIT = "1081bae"


def join_processor_variants() -> dict[str, tuple[Any, Any]]:
    """``{label: (processor module, store retention function)}``: the current processor as installed,
    the current one from source, and commit 1081bae's from source."""
    from benchmarks.harness import REPO, module_from_source, source_at
    from streamproc.dsl import join_graph as dsl_join
    from streamproc.processors import stream_join as current

    new_source = (REPO / "streamproc" / "processors" / "stream_join.py").read_text()
    old_source = source_at(OLD_JOIN_COMMIT, "streamproc/processors/stream_join.py")
    new = module_from_source(new_source, "stream_join_new_from_source")
    old = module_from_source(old_source, f"stream_join_{OLD_JOIN_COMMIT}")

    def old_retention(w: Any) -> int:
        return max(w.before_ms, w.after_ms) + w.grace_ms + 1

    return {"new rule (as installed)": (current, dsl_join.join_store_retention),
            "new rule (from source)": (new, dsl_join.join_store_retention),
            f"old processor {OLD_JOIN_COMMIT} (source)": (old, old_retention)}


def run_join_variant(variant: tuple[Any, Any], diff: int, kind: str, records: list[Any],
                     batch: int) -> tuple[float, int, int]:
    """``run_task`` of the join topology built with ``variant``'s processor class, unmatched-store
    serde and retention (the DSL module's names are swapped while the topology is built and run)."""
    from streamproc.dsl import join_graph as dsl_join

    module, retention = variant
    names = ("StreamStreamJoinProcessor", "unmatched_value_serde", "join_store_retention")
    saved = [getattr(dsl_join, n) for n in names]
    for n, v in zip(names, (module.StreamStreamJoinProcessor, module.unmatched_value_serde, retention)):
        setattr(dsl_join, n, v)
    try:
        t, out, changelog = run_task(join_topology(diff, kind), records, batch)
    finally:
        for n, v in zip(names, saved):
            setattr(dsl_join, n, v)
    return t, (out if isinstance(out, int) else len(out)), changelog


def scenario(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one scenario (in its own process) and return its figures."""
    if name == "tumbling-count":
        records = view_records(args.records, args.keys)
        before = rss_mb()
        rows = []
        floor_best = float("inf")
        floor_out: list[Any] = []
        for on_close in (False, True):
            best, changelog = float("inf"), 0
            out: list[Any] | int = 0
            for _ in range(args.repeat):
                t, out, changelog = run_task(count_topology(on_close), records, args.batch, keep=on_close)
                best = min(best, t)
            n_out = len(out) if isinstance(out, list) else out
            rows.append((f"count, emit on {'close' if on_close else 'update'}", best, n_out, changelog))
            if on_close:
                for _ in range(args.repeat):
                    f, floor_out = run_count_floor(records, args.batch)
                    floor_best = min(floor_best, f)
                if floor_out != out:
                    return {"error": "the floor's output differs from the task's emit-on-close output"}
        rows.append(("floor (hand-written dict)", floor_best, len(floor_out), 0))
        return {"n": len(records), "rows": rows, "rss_before": before, "peak": peak_rss_mb()}
    if name == "stream-join-rule":
        buffered = int(args.buffered.split(",")[0])
        records = join_records(args.join_records, buffered)
        variants = join_processor_variants()
        before = rss_mb()
        rows = []
        for kind in ("join", "left_join"):
            outputs = set()
            for label, variant in variants.items():
                best, n_out, changelog = float("inf"), 0, 0
                for _ in range(args.repeat):
                    t, n_out, changelog = run_join_variant(variant, buffered, kind, records, args.batch)
                    best = min(best, t)
                outputs.add(n_out)
                rows.append((f"{kind.replace('_', ' ')}: {label}", best, n_out, changelog))
            # inner join: the workload has no late or out-of-order record, so both rules give the same
            # pairs; left join: the new rule emits a null result later (t + before + after + grace),
            # so the last window's unmatched records are not yet out at the end of the input
            if kind == "join" and len(outputs) != 1:
                return {"error": f"{kind}: the processors gave different numbers of outputs: {sorted(outputs)}"}
        return {"n": len(records), "rows": rows, "rss_before": before, "peak": peak_rss_mb(), "ratios": True}
    buffered = int(name.split("-")[1])
    records = join_records(args.join_records, buffered)
    before = rss_mb()
    rows = []
    for kind in ("join", "left_join"):
        best, n_out, changelog = float("inf"), 0, 0
        for _ in range(args.repeat):
            t, got, changelog = run_task(join_topology(buffered, kind), records, args.batch)
            n_out = got if isinstance(got, int) else len(got)
            best = min(best, t)
        rows.append((kind.replace("_", " "), best, n_out, changelog))
    return {"n": len(records), "rows": rows, "rss_before": before, "peak": peak_rss_mb()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000, help="page views of the tumbling count")
    p.add_argument("--keys", type=int, default=1_000, help="pages of the tumbling count")
    p.add_argument("--join-records", type=int, default=1_000_000, help="records of each join run (both sides)")
    p.add_argument("--buffered", default="1000,100000", help="records buffered per join window, comma-separated")
    p.add_argument("--batch", type=int, default=500, help="records per Task.process call (a getmany batch)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="100k records, buffered 1k and 10k, one run")
    p.add_argument("--only", default="", help="comma-separated scenarios to run (tumbling-count, join-<B>, "
                                              "stream-join-rule); default all")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.join_records, args.buffered, args.repeat = 100_000, 100_000, "1000,10000", 1
    names = ["tumbling-count"] + [f"join-{int(b)}" for b in args.buffered.split(",")] + ["stream-join-rule"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    ctx = multiprocessing.get_context("spawn")
    failed = False
    print(f"time-window operators through the task path (CPU time, best of {args.repeat}; batch {args.batch})")
    print(f"{'scenario':48}{'records/s':>12}{'us/record':>11}{'outputs':>11}{'changelog':>11}")
    for name in names:
        with ctx.Pool(1) as pool:
            res = pool.apply(scenario, (name, args))
        if "error" in res:
            print(f"{name}: {res['error']}")
            failed = True
            continue
        n = res["n"]
        if name == "tumbling-count":
            title = f"{name}: {n:,} records, {args.keys:,} keys, 1-min windows"
        elif name == "stream-join-rule":
            b = int(args.buffered.split(",")[0])
            title = f"{name}: {n:,} records, ~{b:,} buffered in the window, {b:,} keys; new rule vs old processor"
        else:
            title = (f"{name}: {n:,} records, ~{int(name.split('-')[1]):,} buffered in the window, "
                     f"{int(name.split('-')[1]):,} keys")
        print(title)
        for label, secs, outputs, changelog in res["rows"]:
            print(f"  {label:46}{n / secs:>12,.0f}{secs / n * 1e6:>11.2f}{outputs:>11,}{changelog:>11,}")
        if res.get("ratios"):
            rows = {label: secs for label, secs, _, _ in res["rows"]}
            for kind in ("join", "left join"):
                old = rows[f"{kind}: old processor {OLD_JOIN_COMMIT} (source)"]
                new = rows[f"{kind}: new rule (from source)"]
                print(f"  {kind}: new rule / old processor, records/s (both from source): {old / new:.3f}")
        print(f"  memory: RSS {res['rss_before']:,.0f} MB before processing (interpreter + input), "
              f"peak {res['peak']:,.0f} MB")
        sys.stdout.flush()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
