"""Random conformance scenarios, one generator per operator both engines have.

A scenario is a JSON-able dict: ``id``, ``op`` (``session``, ``time_window``, ``stream_table``,
``stream_stream``, ``stream_agg``, ``table_ops``, ``table_join``, ``table_agg``), the operator's parameters, and ``inputs``: ``[topic, key, value, timestamp]``
records in the order they are piped (keys and values are strings or None). Timestamps follow a
drifting clock with jitter, so records arrive out of order, some of them late. Values are unique
per scenario where outputs must name the records they came from (joins).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

__all__ = ["GENERATORS", "OPERATORS", "generate"]

Scenario = dict[str, Any]


def _clock(rng: random.Random, n: int, jitter: int) -> list[int]:
    """``n`` timestamps >= 0: a clock moving 0..6 ms per record, each record up to ``jitter`` early."""
    out, clock = [], 0
    for _ in range(n):
        clock += rng.choice((0, 1, 2, 3, 6))
        out.append(max(0, clock - (rng.randint(0, jitter) if rng.random() < 0.4 else 0)))
    return out


def _key(rng: random.Random, keys: str, null_share: float = 0.0) -> str | None:
    return None if rng.random() < null_share else rng.choice(keys)


def session(rng: random.Random, sid: int) -> Scenario:
    times = _clock(rng, rng.randint(1, 30), 25)
    return {"id": sid, "op": "session", "agg": rng.choice(("count", "reduce", "aggregate")),
            "emit": rng.choice(("update", "close")), "gap": rng.randint(1, 15), "grace": rng.randint(0, 12),
            "inputs": [["in", _key(rng, "abc", 0.05), "xyzw"[i % 4], t] for i, t in enumerate(times)]}


def time_window(rng: random.Random, sid: int) -> Scenario:
    size = rng.randint(1, 15)
    advance = size if rng.random() < 0.5 else rng.randint(1, size)
    times = _clock(rng, rng.randint(1, 30), 25)
    return {"id": sid, "op": "time_window", "agg": rng.choice(("count", "reduce", "aggregate")),
            "emit": rng.choice(("update", "close")), "size": size, "advance": advance, "grace": rng.randint(0, 12),
            "inputs": [["in", _key(rng, "abc", 0.05), "xyzw"[i % 4], t] for i, t in enumerate(times)]}


def stream_table(rng: random.Random, sid: int) -> Scenario:
    history = rng.randint(5, 40)
    grace = 0 if rng.random() < 0.4 else rng.randint(1, history)
    inputs = []
    for i, t in enumerate(_clock(rng, rng.randint(1, 30), 20)):
        if rng.random() < 0.45:
            inputs.append(["table", _key(rng, "ab"), None if rng.random() < 0.2 else f"T{i}", t])
        else:
            inputs.append(["in", _key(rng, "ab", 0.05), f"s{i}", t])
    return {"id": sid, "op": "stream_table", "kind": rng.choice(("join", "left_join")), "history": history,
            "grace": grace, "inputs": inputs}


def stream_stream(rng: random.Random, sid: int) -> Scenario:
    before, after, grace = rng.randint(0, 12), rng.randint(0, 12), rng.randint(0, 10)
    inputs = []
    times = _clock(rng, rng.randint(1, 30), 25)
    for i, t in enumerate(times):
        side = rng.choice(("left", "right"))
        inputs.append([side, _key(rng, "abc", 0.04), f"{side[0].upper()}{i}", t])
    # the last record moves stream time past every record's window: all unmatched records are final
    inputs.append(["left", "~end", "F", max(times) + before + after + grace + 1])
    return {"id": sid, "op": "stream_stream", "kind": rng.choice(("join", "left_join", "outer_join")),
            "before": before, "after": after, "grace": grace, "inputs": inputs}


def stream_agg(rng: random.Random, sid: int) -> Scenario:
    """A non-windowed aggregation: ``group_by_key``, ``group_by`` (new key ``xy``/``zw`` by value,
    the old key for a None value) or a word count (sentences split into lowercase words)."""
    shape = rng.choice(("group_by_key", "group_by", "wordcount"))
    times = _clock(rng, rng.randint(1, 30), 25)
    inputs = []
    for t in times:
        if shape == "wordcount":
            value = None if rng.random() < 0.08 else " ".join(
                rng.choice("xyzwXY") for _ in range(rng.randint(1, 4)))
        else:
            value = None if rng.random() < 0.1 else rng.choice("xyzw")
        inputs.append(["in", _key(rng, "abc", 0.1), value, t])
    return {"id": sid, "op": "stream_agg", "shape": shape,
            "agg": "count" if shape == "wordcount" else rng.choice(("count", "reduce", "aggregate")),
            "inputs": inputs}


def _table_value(rng: random.Random, i: int, null_share: float) -> str | None:
    return None if rng.random() < null_share else f"{rng.choice('xyzw')}{i % 10}"


def table_ops(rng: random.Random, sid: int) -> Scenario:
    """``table("table")`` then filter / filter_not / map_values / filter then map / map then filter
    (predicate: the value starts with x or y), updates and tombstones (also of absent keys)."""
    times = _clock(rng, rng.randint(1, 30), 25)
    return {"id": sid, "op": "table_ops",
            "shape": rng.choice(("filter", "filter_not", "map_values", "filter_map", "map_filter")),
            "inputs": [["table", _key(rng, "abc", 0.05), _table_value(rng, i, 0.2), t] for i, t in enumerate(times)]}


def table_join(rng: random.Random, sid: int) -> Scenario:
    """``table("left")`` (filtered half of the time) joined with ``table("right")``: inner, left, outer."""
    inputs = []
    for i, t in enumerate(_clock(rng, rng.randint(1, 30), 25)):
        side = rng.choice(("left", "right"))
        value = _table_value(rng, i, 0.25)
        inputs.append([side, _key(rng, "abc", 0.04), None if value is None else side[0].upper() + value, t])
    kind = rng.choice(("join", "left_join", "outer_join"))
    filtered = rng.random() < 0.5
    if filtered:  # the left filter's predicate looks at the value after the side letter
        inputs = [[side, k, v[1:] if v is not None and side == "left" else v, t] for side, k, v, t in inputs]
    return {"id": sid, "op": "table_join", "kind": kind, "filtered": filtered, "inputs": inputs}


def table_agg(rng: random.Random, sid: int) -> Scenario:
    """``table("table").group_by(first letter, rest)`` (a ``w`` value has a None group) then count,
    reduce (concatenate / remove the first occurrence) or aggregate (the same from "")."""
    times = _clock(rng, rng.randint(1, 30), 25)
    return {"id": sid, "op": "table_agg", "agg": rng.choice(("count", "reduce", "aggregate")),
            "inputs": [["table", _key(rng, "abcd", 0.05), _table_value(rng, i, 0.2), t] for i, t in enumerate(times)]}


GENERATORS: dict[str, Callable[[random.Random, int], Scenario]] = {
    "session": session, "time_window": time_window, "stream_table": stream_table, "stream_stream": stream_stream,
    "stream_agg": stream_agg, "table_ops": table_ops, "table_join": table_join, "table_agg": table_agg}
OPERATORS = tuple(GENERATORS)


def generate(op: str, n: int, seed: int) -> list[Scenario]:
    """``n`` scenarios of operator ``op`` from ``seed`` (the same seed gives the same scenarios)."""
    rng = random.Random(f"{op}:{seed}")
    return [GENERATORS[op](rng, i) for i in range(n)]
