"""Run conformance scenarios through both engines and tally the verdicts."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import kafka_streams, ours, scenarios
from .classifiers import compare

__all__ = ["Report", "run"]


@dataclass
class Report:
    """Per operator: scenarios run, agreed, and deliberate differences per classifier; the
    scenarios that differed in a way no classifier explains (with both outputs)."""

    runs: Counter = field(default_factory=Counter)
    agreed: Counter = field(default_factory=Counter)
    deliberate: Counter = field(default_factory=Counter)      # (op, classifier) -> scenarios
    explained: Counter = field(default_factory=Counter)       # op -> scenarios that differed deliberately
    failures: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        out = []
        for op in self.runs:
            n = self.runs[op]
            d = self.explained[op]
            bad = sum(1 for f in self.failures if f["scenario"]["op"] == op)
            out.append(f"{op:14} {n:5} scenarios: {self.agreed[op]:5} agreed, {d:5} differed deliberately, "
                       f"{bad:3} differed otherwise")
            for (o, name), v in sorted(self.deliberate.items()):
                if o == op:
                    out.append(f"{'':14}   {name}: {v}")
        out.append(f"total {sum(self.runs.values())} scenarios, {sum(self.agreed.values())} agreed, "
                   f"{len(self.failures)} unexplained differences, {self.seconds:.1f} s")
        return out


def run(n: int, seed: int = 0, operators: tuple[str, ...] = scenarios.OPERATORS) -> Report:
    """``n`` random scenarios per operator (from ``seed``) through Kafka Streams and streamproc."""
    report = Report()
    t0 = time.monotonic()
    for op in operators:
        batch = scenarios.generate(op, n, seed)
        results = kafka_streams.run(batch)
        retried = _null_key_retries(batch, results)
        for s, k in zip(batch, results):
            report.runs[op] += 1
            mine = ours.run(s)
            # Kafka Streams raises on a None key in a left join with grace; we join it at once.
            # Compare the rest of the scenario without those records (both engines).
            if k["error"] is not None and s["id"] in retried and _joined_at_once(s, mine):
                report.deliberate[(op, NULL_KEY_WITH_GRACE)] += 1
                s, k = retried[s["id"]]
                mine = ours.run(s)
            if k["error"] is not None:
                report.failures.append({"scenario": s, "ours": mine, "kafka_error": k["error"]})
                continue
            verdict = compare(s, mine, k["steps"])
            if verdict.status == "agree":
                report.agreed[op] += 1
            elif verdict.status == "deliberate":
                report.explained[op] += 1
                for name in verdict.classifiers:
                    report.deliberate[(op, name)] += 1
            else:
                report.failures.append({"scenario": s, "ours": mine, "kafka": k["steps"]})
    report.seconds = time.monotonic() - t0
    return report


NULL_KEY_WITH_GRACE = "left_join_null_key_with_grace_joined_at_once"


def _without_null_keys(s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "inputs": [r for r in s["inputs"] if not (r[0] == "in" and r[1] is None)]}


def _null_key_retries(batch: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[int, tuple[Any, Any]]:
    """For left stream-table joins with grace that Kafka Streams failed on and that have None-key
    stream records: the scenario without them and Kafka's result for it, by scenario id."""
    todo = [_without_null_keys(s) for s, k in zip(batch, results)
            if k["error"] is not None and s["op"] == "stream_table" and s["kind"] == "left_join" and s["grace"]
            and any(r[0] == "in" and r[1] is None for r in s["inputs"])]
    return {s["id"]: (s, k) for s, k in zip(todo, kafka_streams.run(todo) if todo else [])}


def _joined_at_once(s: dict[str, Any], mine: list[Any]) -> bool:
    """Whether streamproc joined every None-key stream record of ``s`` at once with None."""
    return all(step == [[None, f"{value}+null", ts]]
               for (topic, key, value, ts), step in zip(s["inputs"], mine) if topic == "in" and key is None)


def describe_failure(f: dict[str, Any]) -> str:
    """A failing scenario with both engines' outputs, per input record."""
    s = f["scenario"]
    lines = [json.dumps({k: v for k, v in s.items() if k != "inputs"})]
    if "kafka_error" in f:
        lines.append(f"  Kafka Streams raised: {f['kafka_error']}")
    kafka = f.get("kafka") or [[]] * len(f["ours"])
    for i, (record, a, b) in enumerate(zip(s["inputs"], f["ours"], kafka)):
        lines.append(f"  {i:3} {record}  streamproc={a}  kafka={b}{'' if a == b else '   <<<'}")
    return "\n".join(lines)
