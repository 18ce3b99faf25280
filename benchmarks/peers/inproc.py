"""In-process comparison without Kafka: prints one JSON line.

Calls :mod:`benchmarks.bench_task_path` (its ``make_records``, ``run_task`` and ``run_floor``):
streamproc's sessions ``Task`` path vs a minimal hand-written Python sessionizer over the same
records, best of ``--repeat`` runs in CPU time.

    python -m benchmarks.peers.inproc --records 1000000 --users 10000 --batch 500 --repeat 3
"""

from __future__ import annotations

import argparse
import json

from benchmarks import bench_task_path as b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    records = b.make_records(args.records, args.users)
    task_best = floor_best = float("inf")
    outputs = floor_outputs = 0
    for _ in range(args.repeat):
        t, outputs, _changelog = b.run_task(records, args.batch)[:3]
        task_best = min(task_best, t)
        f, floor_outputs = b.run_floor(records, args.batch)[:2]
        floor_best = min(floor_best, f)
    n = len(records)
    print(json.dumps({"records": n, "users": args.users, "batch": args.batch, "repeat": args.repeat,
                      "task_per_s": n / task_best, "floor_per_s": n / floor_best,
                      "task_outputs": outputs, "floor_outputs": floor_outputs}))


if __name__ == "__main__":
    main()
