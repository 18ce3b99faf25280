"""Session aggregation (count/reduce/aggregate x both emit strategies, with grace) against the
brute-force reference, over random inputs with out-of-order and late records and None keys."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.dsl import EmitStrategy
from tests.support.dsl import ADAPTERS, adapter_functions, run_sessions, session_topology

from .reference import SessionReference

records = st.lists(
    st.tuples(st.one_of(st.sampled_from(["a", "b"]), st.just(None)), st.sampled_from(["x", "y", "z"]),
              st.integers(min_value=0, max_value=40)),
    max_size=30,
)
# Mostly increasing timestamps with jitter, so sessions form, merge, close and records come late.
drifting = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "z"]),
              st.integers(min_value=-12, max_value=12)),
    min_size=5,
    max_size=60,
).map(lambda items: _drift(items))


def _drift(items: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    out, clock = [], 0
    for key, value, step in items:
        clock = max(0, clock + step) if step >= 0 else clock
        out.append((key, value, max(0, clock + step) if step < 0 else clock))
    return out


def expected(kind: str, gap: int, grace: int, on_close: bool, inputs, retention=None):
    init, agg, merge = adapter_functions(kind)
    ref = SessionReference(gap, grace, init, agg, merge, on_close=on_close, retention=retention)
    out = []
    for key, value, ts in inputs:
        out += ref.process(key, value, ts)
    return out


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(ADAPTERS), on_close=st.booleans(), gap=st.integers(1, 8), grace=st.integers(0, 8),
       inputs=st.one_of(records, drifting))
def test_session_aggregation_matches_reference(kind, on_close, gap, grace, inputs) -> None:
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    got = run_sessions(session_topology(kind, gap, grace, emit), inputs)
    assert got == expected(kind, gap, grace, on_close, inputs)


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(ADAPTERS), on_close=st.booleans(), gap=st.integers(1, 10), grace=st.integers(0, 10),
       extra=st.integers(1, 30), inputs=drifting)
def test_session_aggregation_with_longer_retention_matches_reference(kind, on_close, gap, grace, extra, inputs) -> None:
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    retention = gap + grace + extra
    got = run_sessions(session_topology(kind, gap, grace, emit, retention=retention), inputs)
    assert got == expected(kind, gap, grace, on_close, inputs, retention=retention)
