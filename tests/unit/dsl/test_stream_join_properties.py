"""Windowed stream-stream joins (inner, left, outer; symmetric and asymmetric windows; with and
without grace and a repartition before one side) against the brute-force reference, through the
TopologyTestDriver, over random interleavings of both streams (out of order, late, None keys and
values, duplicates); and the same after a restore from the changelogs at a random point."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamproc.dsl import JoinWindows, StreamsBuilder, Topology
from streamproc.testing import TopologyTestDriver

from .window_reference import StreamJoinReference

KINDS = ("join", "left_join", "outer_join")
SIDES = {"left": 0, "right": 1}

scattered = st.lists(
    st.tuples(st.sampled_from(["left", "right"]), st.one_of(st.sampled_from(["a", "b"]), st.just(None)),
              st.one_of(st.sampled_from(["v1", "v2", "v3"]), st.just(None)), st.integers(0, 40)),
    max_size=40,
)
# Few keys and timestamps: duplicates (same key and timestamp) on both sides, many pairs.
dense = st.lists(
    st.tuples(st.sampled_from(["left", "right"]), st.sampled_from(["a", "b"]), st.sampled_from(["v1", "v2"]),
              st.integers(0, 8)),
    min_size=5, max_size=40,
)
# A drifting clock with jitter: windows close, unmatched records are emitted, some records come late.
drifting = st.lists(
    st.tuples(st.sampled_from(["left", "right"]), st.one_of(st.sampled_from(["a", "b", "c"]), st.just(None)),
              st.sampled_from(["v1", "v2", "v3"]), st.integers(-12, 6)),
    min_size=10, max_size=60,
).map(lambda items: _drift(items))


def _drift(items):
    out, clock = [], 0
    for side, key, value, step in items:
        if step > 0:
            clock += step
        out.append((side, key, value, max(0, clock + min(step, 0))))
    return out


def joiner(left, right):
    return [left, right]


def join_topology(kind: str, windows: JoinWindows, repartition: str | None = None) -> Topology:
    b = StreamsBuilder()
    left, right = b.stream("left"), b.stream("right")
    if repartition == "left":
        left = left.select_key(lambda k, v: k)
    elif repartition == "right":
        right = right.select_key(lambda k, v: k)
    getattr(left, kind)(right, joiner, windows, name="j").to("out")
    return b.build()


def run_reference(kind: str, windows: JoinWindows, inputs) -> list:
    ref = StreamJoinReference(windows.before_ms, windows.after_ms, windows.grace_ms, kind, joiner)
    out = []
    for side, key, value, ts in inputs:
        out += ref.process(SIDES[side], key, value, ts)
    return out


def _outputs(d: TopologyTestDriver) -> list:
    return [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()]


def run_driver(topology: Topology, inputs) -> list:
    with TopologyTestDriver(topology) as d:
        for side, key, value, ts in inputs:
            d.input_topic(side).pipe(key, value, ts)
        return _outputs(d)


symmetric = st.tuples(st.integers(0, 10), st.integers(0, 10)).map(
    lambda t: JoinWindows.of_time_difference_and_grace(t[0], t[1]))
asymmetric = st.tuples(st.integers(0, 10), st.integers(0, 10), st.integers(0, 8)).map(
    lambda t: JoinWindows.of_time_difference_and_grace(0, t[2]).before(t[0]).after(t[1]))


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), windows=st.one_of(symmetric, asymmetric),
       repartition=st.sampled_from([None, None, "left", "right"]), inputs=st.one_of(scattered, dense, drifting))
@example(kind="left_join", windows=JoinWindows.of_time_difference_with_no_grace(5), repartition=None,
         inputs=[("left", "a", "v1", 10), ("right", "b", "v2", 16), ("left", "a", "v3", 20)])
def test_stream_join_matches_reference(kind, windows, repartition, inputs) -> None:
    got = run_driver(join_topology(kind, windows, repartition), inputs)
    assert got == run_reference(kind, windows, inputs)


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(KINDS), windows=st.one_of(symmetric, asymmetric), inputs=st.one_of(dense, drifting),
       split=st.integers(0, 60))
@example(kind="outer_join", windows=JoinWindows.of_time_difference_and_grace(5, 2),
         inputs=[("left", "a", "v1", 10), ("right", "b", "v2", 11), ("left", "c", "v3", 30)], split=2)
@example(kind="join", windows=JoinWindows.of_time_difference_with_no_grace(3),
         inputs=[("left", "a", "v1", 10), ("right", "b", "v1", 20), ("right", "a", "v2", 8)], split=2)
def test_stream_join_resumes_after_restore(kind, windows, inputs, split) -> None:
    """Buffers, unmatched records and the shared stream time come back from the changelogs."""
    topology = join_topology(kind, windows)
    split = min(split, len(inputs))
    with TopologyTestDriver(topology) as full:
        for side, key, value, ts in inputs[:split]:
            full.input_topic(side).pipe(key, value, ts)
        _outputs(full)
        changelogs = full.changelogs()
        for side, key, value, ts in inputs[split:]:
            full.input_topic(side).pipe(key, value, ts)
        want = _outputs(full)
    with TopologyTestDriver(topology, changelogs=changelogs) as restored:
        for side, key, value, ts in inputs[split:]:
            restored.input_topic(side).pipe(key, value, ts)
        assert _outputs(restored) == want


@settings(max_examples=100, deadline=None)
@given(windows=st.one_of(symmetric, asymmetric), inputs=st.one_of(scattered, dense, drifting))
def test_inner_join_is_the_matched_part_of_left_and_outer_joins(windows, inputs) -> None:
    """Left join = inner join + unmatched left records; outer join adds unmatched right records."""
    inner = run_driver(join_topology("join", windows), inputs)
    left = run_driver(join_topology("left_join", windows), inputs)
    outer = run_driver(join_topology("outer_join", windows), inputs)
    assert [r for r in left if r[1][1] is not None] == inner
    assert [r for r in outer if r[1][0] is not None] == left


@settings(max_examples=100, deadline=None)
@given(retention=st.integers(1, 15),
       puts=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 60)), max_size=60),
       split=st.integers(0, 60))
def test_buffer_index_mirrors_its_window_store(retention, puts, split) -> None:
    """The join's key index holds exactly what its buffer (a window store with duplicates) holds,
    after puts, expiry, and loading from a store mid-way (as after a restore)."""
    from streamproc.processors.join_index import BufferIndex
    from streamproc.stores import Stores

    store = Stores.in_memory_window_store("buf", retention, 1, retain_duplicates=True)
    index = BufferIndex(retention)
    for i, (key, ts) in enumerate(puts):
        if i == split:
            index = BufferIndex(retention)
            index.load(store)
        if store.put(key, f"v{i}", ts):
            index.add(key, ts, f"v{i}")
        index.expire(store.observed_stream_time)
    for key in ("a", "b", "c"):
        assert index.fetch(key, -100, 100) == [(kv.key, kv.value) for kv in store.fetch(key, -100, 100)]
    assert len(index) == len(store)
