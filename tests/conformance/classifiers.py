"""Named classifiers of the deliberate differences from Kafka Streams (docs/semantics.md,
"Deliberate differences from Kafka Streams": each is named after a row of that table).

A classifier takes a scenario and both engines' outputs (per input record, the records it caused)
and returns the pair with *that one rule* taken out of the comparison, or None when the rule cannot
apply to the scenario. Two kinds:

* a **normalisation** maps what the rule changes to a common form: e.g. a time window emitted on
  close carries ``end - 1`` here and its largest record timestamp in Kafka, so Kafka's timestamp is
  replaced by ``end - 1`` when it lies inside the window;
* a **counterfactual** runs streamproc again with Kafka's variant of the rule: e.g. session stores
  whose expiry is not strict (a retention 1 ms shorter), or the table without the tombstones
  Kafka's versioned store loses.

:func:`compare` says a scenario *agrees* when the outputs are equal, *differs deliberately* when
applying the scenario's classifiers (in table order, each kept only if needed) makes them equal, and
*differs* otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import ours

__all__ = ["CLASSIFIERS", "Classifier", "Verdict", "compare"]

Steps = list[list[list[Any]]]
Scenario = dict[str, Any]
Pair = tuple[Steps, Steps]


@dataclass(frozen=True)
class Classifier:
    """A deliberate difference: ``name`` (docs/semantics.md's table), the operator it concerns and
    ``apply(scenario, ours, kafka) -> (ours', kafka') | None``."""

    name: str
    op: str
    apply: Callable[[Scenario, Steps, Steps], Pair | None]


@dataclass(frozen=True)
class Verdict:
    """``status`` is ``agree``, ``deliberate`` (explained by ``classifiers``) or ``differ``."""

    status: str
    classifiers: tuple[str, ...] = ()


# -- time windows -------------------------------------------------------------------------------

def _close_emit_timestamp(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    if s["emit"] != "close":
        return None

    def to_end_minus_1(out: list[Any]) -> list[Any]:
        _, start, end = str(out[0]).rsplit("@", 2)
        return [out[0], out[1], int(end) - 1] if int(start) <= out[2] < int(end) else out

    return mine, [[to_end_minus_1(o) for o in step] for step in kafka]


def _close_emits_every_window(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    if s["emit"] != "close":
        return None
    size, advance, retention = s["size"], s["advance"], s["size"] + s["grace"]
    newest_start, kept = -1, []
    for (_, key, _, ts), step in zip(s["inputs"], mine):
        if key is not None and ts >= 0:
            newest_start = max(newest_start, ts // advance * advance)
        # what Kafka's window store has expired by now: starts < newest start - retention
        kept.append([o for o in step if int(str(o[0]).rsplit("@", 2)[1]) >= newest_start - retention])
    del size
    return kept, kafka


# -- sessions -----------------------------------------------------------------------------------

def _strict_session_expiry(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    def non_strict(driver: Any) -> None:
        store = driver.session_store("agg")
        inner = getattr(store, "inner", store)
        inner.retention -= 1          # end < observed - (R - 1)  <=>  end <= observed - R (Kafka's)

    return ours.run(s, adjust=non_strict), kafka


# -- stream-table joins -------------------------------------------------------------------------

def _lost_tombstones(s: Scenario) -> set[int]:
    """Indices of the table tombstones Kafka's versioned store does not keep: the newest update of a
    key that has no older (non-tombstone) version."""
    lost, seen = set(), {}
    for i, (topic, key, value, ts) in enumerate(s["inputs"]):
        if topic != "table" or key is None:
            continue
        versions = seen.setdefault(key, [])
        if value is None and all(t <= ts for t, _ in versions) and all(v is None for _, v in versions):
            lost.add(i)
        versions.append((ts, value))
    return lost


def _versioned_tombstone(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    lost = _lost_tombstones(s)
    if not lost:
        return None
    inputs = [r for i, r in enumerate(s["inputs"]) if i not in lost]
    return ours.run(s, inputs=inputs), [step for i, step in enumerate(kafka) if i not in lost]


def _null_key_with_grace(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    if s["kind"] != "left_join" or not s["grace"]:
        return None
    null_keyed = {value for topic, key, value, _ in s["inputs"] if topic == "in" and key is None}

    def without(steps: Steps) -> Steps:
        return [[o for o in step if not (o[0] is None and str(o[1]).split("+")[0] in null_keyed)] for step in steps]

    return without(mine), without(kafka)


# -- stream-stream joins ------------------------------------------------------------------------

def _ids(out: list[Any]) -> list[str]:
    return [v for v in str(out[1]).split("+") if v != "null"]


def _is_unmatched(out: list[Any]) -> bool:
    return "null" in str(out[1]).split("+")


def _late_records_dropped(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    extent = {"left": s["after"], "right": s["before"]}
    late, stream_time = set(), -1
    for side, key, value, ts in s["inputs"]:
        if key is None or value is None:
            continue
        stream_time = max(stream_time, ts)
        if ts < stream_time - (extent[side] + s["grace"]):
            late.add(value)
    if not late:
        return None
    pairs = [set(_ids(o)) for step in kafka for o in step if not _is_unmatched(o)]
    # records Kafka joined only with late records: here they stay unmatched
    only_late = {i for p in pairs if p & late for i in p - late} - {i for p in pairs if not p & late for i in p}
    return ([[o for o in step if not (_is_unmatched(o) and set(_ids(o)) & only_late)] for step in mine],
            [[o for o in step if not late & set(_ids(o))] for step in kafka])


def _unmatched_once_when_final(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    if s["kind"] == "join":
        return None
    matched = {i for step in kafka for o in step if not _is_unmatched(o) for i in _ids(o)}

    def bagged(steps: Steps, drop_matched: bool) -> Steps:
        bag = sorted((o for step in steps for o in step if _is_unmatched(o)
                      and not (drop_matched and set(_ids(o)) & matched)), key=repr)
        return [[o for o in step if not _is_unmatched(o)] for step in steps] + [bag]

    return bagged(mine, False), bagged(kafka, True)


def _unmatched_keeps_every_value(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    if s["kind"] == "join":
        return None

    def last_per_key_and_time(steps: Steps) -> Steps:
        last: dict[tuple[Any, int, str], int] = {}
        for step in steps:
            for o in step:
                if _is_unmatched(o):
                    (rid,) = _ids(o)
                    group = (o[0], o[2], rid[0])
                    last[group] = max(last.get(group, -1), int(rid[1:]))
        return [[o for o in step if not _is_unmatched(o) or int(_ids(o)[0][1:]) == last[(o[0], o[2], _ids(o)[0][0])]]
                for step in steps]

    return last_per_key_and_time(mine), last_per_key_and_time(kafka)


CLASSIFIERS: tuple[Classifier, ...] = (
    Classifier("strict_session_expiry", "session", _strict_session_expiry),
    Classifier("close_emit_timestamp_is_window_end_minus_1", "time_window", _close_emit_timestamp),
    Classifier("close_emits_every_window", "time_window", _close_emits_every_window),
    Classifier("versioned_tombstone_always_recorded", "stream_table", _versioned_tombstone),
    Classifier("left_join_null_key_with_grace_joined_at_once", "stream_table", _null_key_with_grace),
    Classifier("join_late_records_dropped", "stream_stream", _late_records_dropped),
    Classifier("join_unmatched_emitted_once_when_final", "stream_stream", _unmatched_once_when_final),
    Classifier("join_unmatched_keeps_every_value", "stream_stream", _unmatched_keeps_every_value),
)


def _explains(s: Scenario, mine: Steps, kafka: Steps, chosen: list[Classifier]) -> bool:
    for c in chosen:
        result = c.apply(s, mine, kafka)
        if result is not None:
            mine, kafka = result
    return mine == kafka


def compare(s: Scenario, mine: Steps, kafka: Steps) -> Verdict:
    """The verdict on scenario ``s`` given both engines' outputs."""
    if mine == kafka:
        return Verdict("agree")
    candidates = [c for c in CLASSIFIERS if c.op == s["op"]]
    if not _explains(s, mine, kafka, candidates):
        return Verdict("differ")
    needed = list(candidates)
    for c in candidates:                     # keep only the classifiers the explanation needs
        rest = [x for x in needed if x is not c]
        if _explains(s, mine, kafka, rest):
            needed = rest
    return Verdict("deliberate", tuple(c.name for c in needed))
