"""Runs the shipped topologies over seeded random input through the TopologyTestDriver and prints,
as one JSON document, which hot-path modules ran compiled and a digest of every output and changelog
record. ``test_native.py`` runs it twice (compiled, and with ``STREAMPROC_PURE_PYTHON=1``) and
compares the digests: the compiled hot path must give exactly what its Python source gives.

Usage (from the repository root): ``python -m tests.unit.native_equivalence_job SEED RECORDS``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from typing import Any

from streamproc import _native
from streamproc.dsl import EmitStrategy
from streamproc.testing import TopologyTestDriver
from topologies import currency, pageviews, sessions

MIN = 60_000


def _digest(driver: TopologyTestDriver) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for topic in driver.output_topics():
        records = driver.output_topic(topic).read_records()
        out[f"topic {topic}"] = [len(records), hashlib.sha256(repr(records).encode()).hexdigest()]
    for store, records in sorted(driver.changelogs().items()):
        out[f"changelog {store}"] = [len(records), hashlib.sha256(repr(records).encode()).hexdigest()]
    out["metrics"] = hashlib.sha256(repr(sorted(driver.metrics.items())).encode()).hexdigest()
    return out


def _times(rng: random.Random, n: int, step: int, jitter: int) -> list[int]:
    t, out = 1_700_000_000_000, []
    for _ in range(n):
        t += rng.randrange(step)
        out.append(t - (rng.randrange(jitter) if rng.random() < 0.1 else 0))
    return out


def run(seed: int, n: int) -> dict[str, Any]:
    rng = random.Random(seed)
    result: dict[str, Any] = {"status": _native.status()}
    for emit in (EmitStrategy.ON_WINDOW_CLOSE, EmitStrategy.ON_WINDOW_UPDATE):
        with TopologyTestDriver(sessions.build(gap=10 * MIN, grace=2 * MIN, emit=emit), application_id="s") as d:
            clicks = d.input_topic(sessions.INPUT)
            for ts in _times(rng, n, 4 * MIN, 30 * MIN):
                clicks.pipe(f"u{rng.randrange(40)}", {"page": rng.randrange(9)}, ts)
            result[f"sessions {emit.name}"] = _digest(d)
    with TopologyTestDriver(currency.build(grace=3_000), application_id="c") as d:
        rates, payments = d.input_topic(currency.RATES), d.input_topic(currency.PAYMENTS)
        for ts in _times(rng, n, 1_000, 20_000):
            cur = rng.choice(["USD", "GBP", "JPY", "CHF"])
            if rng.random() < 0.3:
                rates.pipe(cur, round(rng.uniform(0.5, 2.0), 4) if rng.random() < 0.95 else None, ts)
            else:
                pid = f"p{rng.randrange(10**6)}"
                payments.pipe(pid, {"id": pid, "amount": rng.randrange(1, 500), "currency": cur}, ts)
        result["currency"] = _digest(d)
    with TopologyTestDriver(pageviews.build(), application_id="p") as d:
        views, clicks = d.input_topic(pageviews.VIEWS), d.input_topic(pageviews.CLICKS)
        for ts in _times(rng, n, 20_000, 5 * MIN):
            user = f"u{rng.randrange(30)}"
            if rng.random() < 0.7:
                views.pipe(user, {"page": f"/p{rng.randrange(12)}"}, ts)
            else:
                clicks.pipe(user, {"ad": f"a{rng.randrange(5)}"}, ts)
        result["pageviews"] = _digest(d)
    return result


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]), int(sys.argv[2])), sort_keys=True))
