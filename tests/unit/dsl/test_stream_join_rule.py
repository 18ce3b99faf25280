"""The stream-stream join rule (docs/semantics.md, "Stream-stream joins") against a brute-force,
order-free statement of it, over random arrival orders of both sides, inner/left/outer joins,
random (asymmetric) windows and grace:

* a record is late iff ``ts < T - (its side's extent + grace)``, ``T`` the stream time after it;
* every pair of accepted records with equal keys inside each other's window joins exactly once,
  with timestamp ``max(ts1, ts2)``: no pair lost, none duplicated, whatever the arrival order;
* an accepted record of an outer side that has no partner is emitted with ``None`` exactly once, by
  the first later record that moves ``T`` past ``t + before + after + grace``, and a record that
  joined is never emitted with ``None``.

The model below computes the expected outputs from the whole input at once (sets of pairs, a scan
for the first closing record); it shares no code and no step-by-step state with the processor.
Every value is unique (its arrival index), so each output names the records it came from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamproc.dsl import JoinWindows, StreamsBuilder
from streamproc.testing import TopologyTestDriver

KINDS = ("join", "left_join", "outer_join")
LEFT, RIGHT = "left", "right"


@dataclass(frozen=True)
class Expected:
    pairs: Counter          # (key, left index, right index, timestamp) -> 1
    unmatched: dict         # (side, index) -> (step it is emitted at or None, key, timestamp)
    late: int


def model(kind: str, before: int, after: int, grace: int, inputs: list[tuple[str, str, int]]) -> Expected:
    """What the rule says, computed over the whole input (``inputs[i] = (side, key, ts)``)."""
    outer = {LEFT: kind in ("left_join", "outer_join"), RIGHT: kind == "outer_join"}
    extent = {LEFT: after, RIGHT: before}
    stream_time, times, accepted = -1, [], []
    for side, _, ts in inputs:
        stream_time = max(stream_time, ts)
        times.append(stream_time)
        accepted.append(ts >= stream_time - (extent[side] + grace))
    pairs: Counter = Counter()
    partnered: set[int] = set()
    for i, (side_i, key_i, ts_i) in enumerate(inputs):
        for j, (side_j, key_j, ts_j) in enumerate(inputs):
            if side_i == LEFT and side_j == RIGHT and key_i == key_j and accepted[i] and accepted[j] \
                    and ts_i - before <= ts_j <= ts_i + after:
                pairs[(key_i, i, j, max(ts_i, ts_j))] += 1
                partnered.update((i, j))
    unmatched = {}
    for i, (side, key, ts) in enumerate(inputs):
        if outer[side] and accepted[i] and i not in partnered:
            step = next((k for k in range(i + 1, len(inputs)) if times[k] > ts + before + after + grace), None)
            unmatched[(side, i)] = (step, key, ts)
    return Expected(pairs, unmatched, accepted.count(False))


def run(kind: str, windows: JoinWindows, inputs: list[tuple[str, str, int]]) -> tuple[list, int]:
    """Per input step, the outputs ``(key, (left index, right index), ts)`` of the join."""
    b = StreamsBuilder()
    getattr(b.stream(LEFT), kind)(b.stream(RIGHT), lambda lv, rv: (lv, rv), windows, name="j").to("out")
    steps = []
    with TopologyTestDriver(b.build()) as d:
        out = d.output_topic("out")
        for i, (side, key, ts) in enumerate(inputs):
            d.input_topic(side).pipe(key, i, ts)
            steps.append([(r.key, r.value, r.timestamp) for r in out.read_records()])
        late = d.metrics["dropped_records_late"]
    return steps, late


records = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from(["a", "b"]), st.integers(0, 60)),
                   min_size=1, max_size=45)


@settings(max_examples=400, deadline=None)
@given(kind=st.sampled_from(KINDS), before=st.integers(0, 12), after=st.integers(0, 12), grace=st.integers(0, 10),
       inputs=records.flatmap(st.permutations))
@example(kind="join", before=10, after=10, grace=5,              # the pair of issue 20: r2 at 120, l5 at 127
         inputs=[(RIGHT, "k", 120), (LEFT, "x", 136), (LEFT, "k", 127)])
@example(kind="left_join", before=10, after=10, grace=5,
         inputs=[(LEFT, "k", 100), (RIGHT, "x", 116), (RIGHT, "k", 105), (RIGHT, "x", 126)])
def test_join_obeys_the_rule_in_any_arrival_order(kind, before, after, grace, inputs) -> None:
    windows = JoinWindows.of_time_difference_and_grace(0, grace).before(before).after(after)
    want = model(kind, before, after, grace, inputs)
    steps, late = run(kind, windows, inputs)
    assert late == want.late
    got_pairs: Counter = Counter()
    got_unmatched: dict = {}
    for step, outputs in enumerate(steps):
        for key, (lv, rv), ts in outputs:
            if lv is not None and rv is not None:
                got_pairs[(key, lv, rv, ts)] += 1
            else:
                side, index = (LEFT, lv) if rv is None else (RIGHT, rv)
                assert (side, index) not in got_unmatched, f"record {index} emitted unmatched twice"
                got_unmatched[(side, index)] = (step, key, ts)
    assert got_pairs == want.pairs                        # none lost, none duplicated
    matched = {i for _, lv, rv, _ in got_pairs for i in (lv, rv)}
    assert not matched & {index for _, index in got_unmatched}, "a record both matched and unmatched"
    emitted = {k: v for k, v in want.unmatched.items() if v[0] is not None}
    assert got_unmatched == emitted                       # once each, at the first step that closes it
