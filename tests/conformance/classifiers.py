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

from streamproc.processors.session_aggregate import SessionAggregateProcessor
from streamproc.records import Windowed

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
    """Kafka's session stores hide a session from the aggregation's lookups once
    ``end <= observed - retention`` (ours: ``end < observed - retention``), where ``observed`` is the
    largest session end put. The session is not gone though: Kafka's time-ordered store (emit on
    close) still emits it when it closes. The counterfactual re-runs streamproc with exactly that
    lookup rule: the aggregation's session lookup leaves out sessions with
    ``end <= observed - retention``; what is stored and emitted is unchanged."""

    def non_strict_lookup(driver: Any) -> None:
        (task,) = driver.tasks
        task.initialize()
        (agg,) = [p for p in task.processors.values() if isinstance(p, SessionAggregateProcessor)]
        store = driver.session_store("agg")
        inner = getattr(store, "inner", store)

        def kafka_find(key: Any, timestamp: int, gap: int) -> list[list[Any]]:
            cutoff = inner.observed_stream_time - inner.retention
            with store.find_sessions(key, timestamp - gap, timestamp + gap) as found:
                return [[w.end, w.start, v, w.key] for w, v in found if w.end > cutoff]

        def replace(key: Any, removed: list[list[Any]], start: int, end: int, value: Any) -> bool:
            for end_, start_, _, key_ in removed:
                store.remove(Windowed(key_, start_, end_))
            return bool(store.put(Windowed(key, start, end), value))

        # test-only counterfactual: the operator's lookup and write calls (its documented
        # store-access seam, used as is for stores without the fast path) with Kafka's lookup rule
        agg._fast, agg._find, agg._replace = False, kafka_find, replace

    return ours.run(s, adjust=non_strict_lookup), kafka


# -- stream-table joins -------------------------------------------------------------------------

def _lost_tombstones(s: Scenario) -> dict[int, tuple[str, Any, int]]:
    """The table tombstones Kafka Streams' versioned store loses, by input index, with the version
    they erase: a tombstone with the same timestamp as the key's newest version, a value. Kafka
    deletes that value from its latest-value store and records no tombstone, so the version before
    it is again the newest (and an older update put later looks current); ours stores the
    tombstone, which replaces the value. The counterfactual erases that version from ours."""
    lost, seen = {}, {}
    for i, (topic, key, value, ts) in enumerate(s["inputs"]):
        if topic != "table" or key is None:
            continue
        versions = seen.setdefault(key, {})
        if value is None and versions and max(versions) == ts and versions[ts] is not None:
            lost[i] = ("versioned", key, ts)
            del versions[ts]
            continue
        versions[ts] = value
    return lost


def _versioned_tombstone(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    lost = _lost_tombstones(s)
    if not lost:
        return None
    return ours.run(s, erase=lost), kafka


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
    unmatched_in_kafka = {i for step in kafka for o in step if _is_unmatched(o) for i in _ids(o)}
    only_late = ({i for p in pairs if p & late for i in p - late} - {i for p in pairs if not p & late for i in p}
                 - unmatched_in_kafka)     # (Kafka may have emitted them with null before the late partner came)
    return ([[o for o in step if not (_is_unmatched(o) and set(_ids(o)) & only_late)] for step in mine],
            [[o for o in step if not late & set(_ids(o))] for step in kafka])


def _boundary_pairs(s: Scenario) -> set[frozenset[str]]:
    """Pairs of records in each other's window that Kafka Streams cannot join: when the later of the
    two arrives, the earlier one's timestamp is ``<= observed - (before + after + grace)`` of the
    earlier one's side, where ``observed`` is the largest timestamp put into that side's buffer so
    far (Kafka buffers every record with a key, late ones included). Kafka's buffer no longer returns
    it; ours keeps one millisecond more (``before + after + grace + 1``)."""
    before, after, retention = s["before"], s["after"], s["before"] + s["after"] + s["grace"]
    observed = {"left": -1, "right": -1}
    seen: list[tuple[str, Any, str, int]] = []
    out = set()
    for side, key, value, ts in s["inputs"]:
        if key is None or value is None:
            continue
        for other_side, other_key, other_value, other_ts in seen:
            if other_side == side or other_key != key or other_ts > observed[other_side] - retention:
                continue
            lt, rt = (ts, other_ts) if side == "left" else (other_ts, ts)
            if lt - before <= rt <= lt + after:
                out.add(frozenset((value, other_value)))
        seen.append((side, key, value, ts))
        observed[side] = max(observed[side], ts)
    return out


def _pair_at_retention_boundary(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    boundary = _boundary_pairs(s)
    ours_boundary = [p for step in mine for o in step if not _is_unmatched(o) and (p := frozenset(_ids(o))) in boundary]
    if not ours_boundary:
        return None
    others = {i for step in mine for o in step if not _is_unmatched(o) and frozenset(_ids(o)) not in boundary
              for i in _ids(o)}
    # records whose every pair here is a boundary pair stay unmatched in Kafka
    only_boundary = {i for p in ours_boundary for i in p} - others
    return ([[o for o in step if _is_unmatched(o) or frozenset(_ids(o)) not in boundary] for step in mine],
            [[o for o in step if not (_is_unmatched(o) and set(_ids(o)) & only_boundary)] for step in kafka])


def _final_steps(s: Scenario) -> dict[str, int]:
    """Per record of an outer side: the index of the input record that, by our rule, emits it with a
    null partner if it never joins: the first later record with a key that moves stream time ``T``
    past ``t + before + after + grace``."""
    close = s["before"] + s["after"] + s["grace"]
    outer = {"left"} if s["kind"] == "left_join" else {"left", "right"}
    inputs = s["inputs"]
    times, stream_time = [], -1
    for _, key, value, ts in inputs:
        if key is not None and value is not None:
            stream_time = max(stream_time, ts)
        times.append(stream_time)
    out = {}
    for i, (side, key, value, ts) in enumerate(inputs):
        if side in outer and key is not None:
            out[value] = next((j for j in range(i + 1, len(inputs)) if times[j] > ts + close
                               and inputs[j][1] is not None and times[j] > times[j - 1]), -1)
    return out


def _unmatched_once_when_final(s: Scenario, mine: Steps, kafka: Steps) -> Pair | None:
    """Ours: each unmatched record once, by the record our rule names (checked here), never after a
    match. Kafka: as soon as ``T > t + extent + grace`` (or at once when ``t + extent < T``, ``T``
    counting records without a key too), ordered by (timestamp, right before left, key), and again
    joined if a partner comes later (KAFKA-19536). So: our null-partner results must come at the
    step the rule names; then both engines' null-partner results are compared as one multiset,
    Kafka's without the records it also joined."""
    if s["kind"] == "join":
        return None
    final = _final_steps(s)
    for j, step in enumerate(mine):
        for o in step:
            if _is_unmatched(o) and o[0] is not None and final.get(_ids(o)[0]) != j:
                return None
    matched = {i for step in kafka for o in step if not _is_unmatched(o) for i in _ids(o)}

    def bagged(steps: Steps, drop_matched: bool) -> Steps:
        bag = sorted((o for step in steps for o in step if _is_unmatched(o)
                      and not (drop_matched and set(_ids(o)) & matched)), key=repr)
        return [[o for o in step if not _is_unmatched(o)] for step in steps] + [bag]

    return bagged(mine, False), bagged(kafka, True)


CLASSIFIERS: tuple[Classifier, ...] = (
    Classifier("strict_session_expiry", "session", _strict_session_expiry),
    Classifier("close_emit_timestamp_is_window_end_minus_1", "time_window", _close_emit_timestamp),
    Classifier("close_emits_every_window", "time_window", _close_emits_every_window),
    Classifier("versioned_tombstone_always_recorded", "stream_table", _versioned_tombstone),
    Classifier("left_join_null_key_with_grace_joined_at_once", "stream_table", _null_key_with_grace),
    Classifier("join_late_records_dropped", "stream_stream", _late_records_dropped),
    Classifier("join_pair_at_retention_boundary_joins", "stream_stream", _pair_at_retention_boundary),
    Classifier("join_unmatched_emitted_once_when_final", "stream_stream", _unmatched_once_when_final),
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
