"""Versioned stream-table join (inner/left, with and without grace, with and without a repartition
before it) against the brute-force reference, over random interleavings of table updates
(out of order, tombstones, beyond history) and stream records (late, None keys and values)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.testing import TopologyTestDriver
from tests.support.dsl import join_topology

from .reference import JoinReference

# Few keys, no None: lookups older than the history retention and rejected table updates are common.
dense = st.lists(
    st.tuples(st.sampled_from(["table", "stream"]), st.sampled_from(["a", "b"]),
              st.sampled_from(["v1", "v2", "v3"]), st.integers(min_value=0, max_value=30)),
    min_size=10, max_size=40,
)
# Few distinct timestamps: buffered records of different keys share a timestamp (release order).
ties = st.lists(
    st.tuples(st.sampled_from(["table", "stream", "stream"]), st.sampled_from(["b", "a"]),
              st.sampled_from(["v1", "v2", "v3"]), st.integers(min_value=0, max_value=8)),
    min_size=10, max_size=40,
)
events = st.lists(
    st.tuples(
        st.sampled_from(["table", "stream"]),
        st.one_of(st.sampled_from(["a", "b"]), st.just(None)),
        st.one_of(st.sampled_from(["v1", "v2", "v3"]), st.just(None)),
        st.integers(min_value=0, max_value=60),
    ),
    max_size=40,
)


# A drifting clock with jitter: table updates and stream records arrive out of order, some far
# behind (older than history retention or the grace period), many share a timestamp.
drifting = st.lists(
    st.tuples(
        st.sampled_from(["table", "stream", "stream"]),
        st.one_of(st.sampled_from(["a", "b"]), st.just(None)),
        st.one_of(st.sampled_from(["v1", "v2", "v3"]), st.just(None)),
        st.integers(min_value=-10, max_value=6),
    ),
    min_size=10,
    max_size=50,
).map(lambda items: _drift(items))


def _drift(items):
    out, clock = [], 0
    for topic, key, value, step in items:
        if step > 0:
            clock += step
        out.append((topic, key, value, max(0, clock + min(step, 0))))
    return out


def run_driver(topology, inputs):
    with TopologyTestDriver(topology) as d:
        for topic, key, value, ts in inputs:
            d.input_topic(topic).pipe(key, value, ts)
        return [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()]


def run_reference(left, history, grace, inputs):
    ref = JoinReference(history, lambda v, t: [v, t], left, grace)
    out = []
    for topic, key, value, ts in inputs:
        if topic == "table":
            ref.table_update(key, value, ts)
        else:
            out += ref.stream_record(key, value, ts)
    return out


@settings(max_examples=400, deadline=None)
@given(left=st.booleans(), history=st.integers(0, 12), grace_fraction=st.one_of(st.none(), st.floats(0, 1)),
       repartition=st.booleans(), inputs=st.one_of(events, drifting, dense, ties))
def test_join_matches_reference(left, history, grace_fraction, repartition, inputs) -> None:
    grace = None if grace_fraction is None else int(history * grace_fraction)
    got = run_driver(join_topology(left, history, grace, repartition=repartition), inputs)
    assert got == run_reference(left, history, grace, inputs)
