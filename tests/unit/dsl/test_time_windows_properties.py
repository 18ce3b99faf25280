"""Tumbling and hopping aggregation (count/reduce/aggregate x both emit strategies, with grace, with
and without a longer retention or a repartition) against the brute-force reference, through the
TopologyTestDriver, over random inputs with out-of-order and late records and None keys; and the
same after a restore from the changelogs at a random point."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamproc.dsl import EmitStrategy, StreamsBuilder, TimeWindows, Topology
from streamproc.testing import TopologyTestDriver
from tests.support.dsl import ADAPTERS, as_tuples

from .window_reference import TimeWindowReference

scattered = st.lists(
    st.tuples(st.one_of(st.sampled_from(["a", "b"]), st.just(None)), st.sampled_from(["x", "y", "z"]),
              st.integers(min_value=0, max_value=60)),
    max_size=30,
)
# Mostly increasing timestamps with jitter: windows fill, close, expire, and records come late.
drifting = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "z"]),
              st.integers(min_value=-15, max_value=8)),
    min_size=5,
    max_size=60,
).map(lambda items: _drift(items))


def _drift(items: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    out, clock = [], 0
    for key, value, step in items:
        if step > 0:
            clock += step
        out.append((key, value, max(0, clock + min(step, 0))))
    return out


def _functions(kind: str):
    if kind == "count":
        return (lambda: 0), (lambda k, v, a: a + 1)
    if kind == "reduce":
        return (lambda: None), (lambda k, v, a: v if a is None else a + v)
    return list, (lambda k, v, a: a + [v])


def window_topology(kind: str, windows: TimeWindows, emit: EmitStrategy, retention: int | None = None,
                    repartition: bool = False) -> Topology:
    b = StreamsBuilder()
    stream = b.stream("in")
    if repartition:
        stream = stream.select_key(lambda k, v: k)
    windowed = stream.group_by_key().windowed_by(windows)
    if kind == "count":
        table = windowed.count(name="w", emit=emit, retention=retention)
    elif kind == "reduce":
        table = windowed.reduce(lambda a, v: a + v, name="w", emit=emit, retention=retention)
    else:
        table = windowed.aggregate(list, lambda k, v, a: a + [v], name="w", emit=emit, retention=retention)
    table.to_stream().to("out")
    return b.build()


def expected(kind: str, windows: TimeWindows, on_close: bool, inputs) -> list:
    init, agg = _functions(kind)
    ref = TimeWindowReference(windows.size_ms, windows.advance_ms, windows.grace_ms, init, agg, on_close)
    out = []
    for key, value, ts in inputs:
        out += ref.process(key, value, ts)
    return out


def run(topology: Topology, inputs) -> list:
    with TopologyTestDriver(topology) as d:
        topic = d.input_topic("in")
        for key, value, ts in inputs:
            topic.pipe(key, value, ts)
        return as_tuples(d.output_topic("out").read_records())


window_defs = st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(0, 10)).map(
    lambda t: TimeWindows.of_size_and_grace(t[0], t[2]).advance_by(min(t[1], t[0])))


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(ADAPTERS), on_close=st.booleans(), windows=window_defs,
       extra_retention=st.sampled_from([None, None, 0, 7]), repartition=st.booleans(),
       inputs=st.one_of(scattered, drifting))
@example(kind="count", on_close=True, windows=TimeWindows.of_size_with_no_grace(10),
         extra_retention=None, repartition=False, inputs=[("a", "x", 5), ("a", "x", 25)])
def test_time_window_aggregation_matches_reference(kind, on_close, windows, extra_retention, repartition,
                                                   inputs) -> None:
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    retention = None if extra_retention is None else windows.size_ms + windows.grace_ms + extra_retention
    got = run(window_topology(kind, windows, emit, retention, repartition), inputs)
    assert got == expected(kind, windows, on_close, inputs)


def _outputs(d: TopologyTestDriver) -> list:
    return as_tuples(d.output_topic("out").read_records())


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(ADAPTERS), on_close=st.booleans(), windows=window_defs,
       inputs=st.one_of(scattered, drifting), split=st.integers(0, 60))
@example(kind="count", on_close=False, windows=TimeWindows.of_size_with_no_grace(10).advance_by(5),
         inputs=[("a", "x", 7), ("a", "x", 3), ("a", "x", 12)], split=1)
@example(kind="count", on_close=False, windows=TimeWindows.of_size_and_grace(10, 3),
         inputs=[("a", "x", 29), ("b", "x", 15)], split=1)   # stream time 29 is restored: 15 stays late
def test_time_window_aggregation_resumes_after_restore(kind, on_close, windows, inputs, split) -> None:
    """Replaying the changelogs into a fresh driver restores the windows, their timestamps, stream time
    (so late records stay late) and the emit-on-close progress (nothing emitted twice)."""
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    topology = window_topology(kind, windows, emit)
    split = min(split, len(inputs))
    with TopologyTestDriver(topology) as full:
        for key, value, ts in inputs[:split]:
            full.input_topic("in").pipe(key, value, ts)
        _outputs(full)
        changelogs = full.changelogs()
        for key, value, ts in inputs[split:]:
            full.input_topic("in").pipe(key, value, ts)
        want = _outputs(full)
    with TopologyTestDriver(topology, changelogs=changelogs) as restored:
        for key, value, ts in inputs[split:]:
            restored.input_topic("in").pipe(key, value, ts)
        assert _outputs(restored) == want
