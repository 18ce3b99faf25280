"""Small builders shared by the DSL tests: session and join topologies, run through the driver."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder, Topology
from streamproc.testing import TopologyTestDriver

ADAPTERS = ("count", "reduce", "aggregate")


def adapter_functions(kind: str) -> tuple[Any, Any, Any]:
    """``(initializer, aggregator, merger)`` equivalent to each DSL adapter, for the reference."""
    if kind == "count":
        return (lambda: 0), (lambda k, v, a: a + 1), (lambda k, a, b: a + b)
    if kind == "reduce":
        return (lambda: None), (lambda k, v, a: v if a is None else a + v), (lambda k, a, b: b if a is None else a + b)
    return (list), (lambda k, v, a: a + [v]), (lambda k, a, b: a + b)


def session_topology(kind: str, gap: int, grace: int, emit: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE,
                     retention: int | None = None, name: str = "sessions") -> Topology:
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    if kind == "count":
        table = windowed.count(name=name, emit=emit, retention=retention)
    elif kind == "reduce":
        table = windowed.reduce(lambda a, v: a + v, name=name, emit=emit, retention=retention)
    else:
        table = windowed.aggregate(list, lambda k, v, a: a + [v], lambda k, a, b: a + b, name=name,
                                   emit=emit, retention=retention)
    table.to_stream().to("out")
    return b.build()


def as_tuples(records: Iterable[Any]) -> list[tuple[Any, Any, int]]:
    """Driver records as ``(key, value, ts)``; a Windowed key as ``(key, start, end)``."""
    return [(tuple(r.key) if hasattr(r.key, "start") else r.key, r.value, r.timestamp) for r in records]


def run_sessions(topology: Topology, records: Iterable[tuple[Any, Any, int]]) -> list[tuple[Any, Any, int]]:
    with TopologyTestDriver(topology, application_id="t") as d:
        topic = d.input_topic("in")
        for key, value, ts in records:
            topic.pipe(key, value, ts)
        return as_tuples(d.output_topic("out").read_records())


def join_topology(left: bool, history: int, grace: int | None, repartition: bool = False) -> Topology:
    b = StreamsBuilder()
    table = b.table("table", name="tbl", versioned=history)
    stream = b.stream("stream")
    if repartition:
        stream = stream.select_key(lambda k, v: k)
    joiner = lambda v, t: [v, t]
    joined = stream.left_join(table, joiner, grace=grace, name="j") if left else \
        stream.join(table, joiner, grace=grace, name="j")
    joined.to("out")
    return b.build()
