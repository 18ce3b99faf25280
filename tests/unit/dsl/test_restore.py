"""Restore: a task's changelog output replayed into a fresh task gives the same subsequent outputs
(session aggregate in both emit strategies, join grace buffer, ON_WINDOW_CLOSE progress)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamproc.dsl import EmitStrategy
from streamproc.engine.task import Task
from streamproc.testing import TopologyTestDriver
from tests.support.dsl import ADAPTERS, join_topology, session_topology

session_inputs = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), st.integers(0, 60)),
    min_size=2, max_size=40)
join_inputs = st.lists(
    st.tuples(st.sampled_from(["table", "stream", "stream"]), st.sampled_from(["a", "b"]),
              st.sampled_from(["v1", "v2"]), st.integers(0, 40)),
    min_size=2, max_size=40)


def _outputs(d: TopologyTestDriver):
    return [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()]


def check_restore(topology, inputs, split) -> None:
    split = min(split, len(inputs))
    with TopologyTestDriver(topology) as full:
        for topic, key, value, ts in inputs[:split]:
            full.input_topic(topic).pipe(key, value, ts)
        _outputs(full)
        changelogs = full.changelogs()
        for topic, key, value, ts in inputs[split:]:
            full.input_topic(topic).pipe(key, value, ts)
        expected = _outputs(full)
    with TopologyTestDriver(topology, changelogs=changelogs) as restored:
        for topic, key, value, ts in inputs[split:]:
            restored.input_topic(topic).pipe(key, value, ts)
        assert _outputs(restored) == expected


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(ADAPTERS), on_close=st.booleans(), gap=st.integers(1, 10), grace=st.integers(0, 10),
       extra_retention=st.sampled_from([0, 0, 15]), inputs=session_inputs, split=st.integers(0, 40))
@example(kind="count", on_close=True, gap=5, grace=0, extra_retention=15,
         inputs=[("a", "x", 0), ("b", "x", 20), ("c", "x", 40)], split=2)
def test_session_aggregation_resumes_after_restore(kind, on_close, gap, grace, extra_retention, inputs, split) -> None:
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    topology = session_topology(kind, gap, grace, emit, retention=gap + grace + extra_retention)
    check_restore(topology, [("in", k, v, ts) for k, v, ts in inputs], split)


@settings(max_examples=100, deadline=None)
@given(left=st.booleans(), history=st.integers(0, 20), grace=st.one_of(st.none(), st.integers(0, 20)),
       inputs=join_inputs, split=st.integers(0, 40))
@example(left=False, history=100, grace=10,
         inputs=[("table", "a", "t", 0), ("stream", "a", "s1", 50), ("stream", "a", "s2", 20)], split=2)
def test_join_buffer_resumes_after_restore(left, history, grace, inputs, split) -> None:
    grace = None if grace is None else min(grace, history)
    check_restore(join_topology(left, history, grace), inputs, split)


def test_on_window_close_progress_is_restored_so_nothing_is_emitted_twice() -> None:
    topology = session_topology("count", 10, 0, EmitStrategy.ON_WINDOW_CLOSE)
    with TopologyTestDriver(topology) as d:
        d.input_topic("in").pipe("a", "x", 0)
        d.input_topic("in").pipe("b", "x", 20)   # closes a@[0,0]
        assert _outputs(d) == [(("a", 0, 0), 1, 0)]
        progress = d.changelog("sessions-progress")
        assert progress and progress[-1].key == b"last_emitted_close"
        changelogs = d.changelogs()
    with TopologyTestDriver(topology, changelogs=changelogs) as d2:
        d2.input_topic("in").pipe("c", "x", 40)  # closes b@[20,20] only
        assert _outputs(d2) == [(("b", 20, 20), 1, 20)]


def test_task_restore_by_changelog_topic_and_only_before_processing() -> None:
    topology = join_topology(left=True, history=100, grace=10)
    source = Task(topology, 0, 0, "app")
    from streamproc.records import Record
    source.process("table", 0, [Record("k", "t1", 5, offset=0)])
    source.process("stream", 0, [Record("k", "s1", 7, offset=0), Record("k", "s2", 9, offset=1)])
    assert source.drain_outputs() == []          # both buffered: 7 + 10 > 9
    logs = source.drain_changelogs()
    assert set(logs) == {"app-tbl-changelog", "app-j-buffer-changelog", "app-j-progress-changelog"}
    fresh = Task(topology, 0, 0, "app")
    for topic, records in logs.items():
        fresh.restore(topic, records)
    fresh.process("stream", 0, [Record("k", "s3", 17, offset=2)])
    assert [(o.key, o.value, o.timestamp) for o in fresh.drain_outputs()] == [("k", ["s1", "t1"], 7)]
    import pytest
    with pytest.raises(ValueError, match="before processing"):
        fresh.restore("tbl", [])


@settings(max_examples=60, deadline=None)
@given(session_inputs, st.lists(st.integers(1, 39), min_size=1, max_size=4))
def test_restarts_chain_like_a_changelog_topic(inputs, splits) -> None:
    """A driver's changelog holds what was replayed into it, then what it wrote (as the topic does),
    so restarting again and again from the last driver's changelogs loses nothing."""
    topology = session_topology("aggregate", 10, 20)
    with TopologyTestDriver(topology) as whole:
        for _, key, value, ts in [("in", *i) for i in inputs]:
            whole.input_topic("in").pipe(key, value, ts)
        expected = _outputs(whole)
    got, logs, done = [], None, 0
    for cut in sorted(set(splits)) + [len(inputs)]:
        with TopologyTestDriver(topology, changelogs=logs) as d:
            for key, value, ts in inputs[done:cut]:
                d.input_topic("in").pipe(key, value, ts)
            got += _outputs(d)
            logs = d.changelogs()
        done = max(done, cut)
    assert got == expected
