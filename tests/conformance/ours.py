"""The conformance scenarios through streamproc's TopologyTestDriver, with the outputs in the Java
runner's format: per input record, ``[key, value, timestamp]`` of each output (a windowed key as
``"key@start@end"``, counts as strings, the joiner's ``left+right`` with ``null`` for a missing side)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamproc.dsl import EmitStrategy, JoinWindows, SessionWindows, StreamsBuilder, TimeWindows, Topology
from streamproc.records import Windowed
from streamproc.testing import TopologyTestDriver

__all__ = ["run"]

Steps = list[list[list[Any]]]


def _joiner(left: Any, right: Any) -> str:
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def _aggregated(windowed: Any, s: dict[str, Any]) -> Any:
    emit = EmitStrategy.ON_WINDOW_CLOSE if s["emit"] == "close" else EmitStrategy.ON_WINDOW_UPDATE
    if s["agg"] == "count":
        return windowed.count(name="agg", emit=emit)
    if s["agg"] == "reduce":
        return windowed.reduce(lambda agg, v: agg + v, name="agg", emit=emit)
    if s["op"] == "session":
        return windowed.aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b, name="agg", emit=emit)
    return windowed.aggregate(lambda: "", lambda k, v, agg: agg + v, name="agg", emit=emit)


def _group(k: Any, v: Any) -> Any:
    if v is None:
        return k
    return "xy" if v in ("x", "y") else "zw"


def _stream_aggregated(stream: Any, s: dict[str, Any]) -> Any:
    if s["shape"] == "wordcount":
        return (stream.flat_map_values(lambda v: [] if v is None else v.lower().split(" "))
                .group_by(lambda k, word: word).count(name="agg"))
    grouped = stream.group_by_key() if s["shape"] == "group_by_key" else stream.group_by(_group)
    if s["agg"] == "count":
        return grouped.count(name="agg")
    if s["agg"] == "reduce":
        return grouped.reduce(lambda agg, v: agg + v, name="agg")
    return grouped.aggregate(lambda: "", lambda k, v, agg: agg + v, name="agg")


def _passes(v: str) -> bool:
    return v.startswith(("x", "y"))


def _table_ops(table: Any, shape: str) -> Any:
    if shape == "filter":
        return table.filter(lambda k, v: _passes(v))
    if shape == "filter_not":
        return table.filter_not(lambda k, v: _passes(v))
    if shape == "map_values":
        return table.map_values(str.upper)
    if shape == "filter_map":
        return table.filter(lambda k, v: _passes(v)).map_values(lambda v: v + "!")
    return table.map_values(lambda v: v + "!").filter(lambda k, v: _passes(v))


def _table_aggregated(table: Any, agg: str) -> Any:
    grouped = table.group_by(lambda k, v: (None if v.startswith("w") else v[0], v[1:]))
    if agg == "count":
        return grouped.count(name="agg")
    if agg == "reduce":
        return grouped.reduce(lambda a, v: a + v, lambda a, v: a.replace(v, "", 1), name="agg")
    return grouped.aggregate(lambda: "", lambda k, v, a: a + v, lambda k, v, a: a.replace(v, "", 1), name="agg")


def topology(s: dict[str, Any]) -> Topology:
    """streamproc's topology for scenario ``s`` (the same operator the Java runner builds)."""
    b = StreamsBuilder()
    op = s["op"]
    if op == "session":
        grouped = b.stream("in").group_by_key()
        _aggregated(grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(s["gap"], s["grace"])),
                    s).to_stream().to("out")
    elif op == "time_window":
        windows = TimeWindows.of_size_and_grace(s["size"], s["grace"]).advance_by(s["advance"])
        _aggregated(b.stream("in").group_by_key().windowed_by(windows), s).to_stream().to("out")
    elif op == "stream_table":
        table = b.table("table", name="versioned", versioned=s["history"])
        grace = s["grace"] or None
        getattr(b.stream("in"), s["kind"])(table, _joiner, grace=grace, name="j").to("out")
    elif op == "stream_stream":
        windows = JoinWindows.of_time_difference_and_grace(0, s["grace"]).before(s["before"]).after(s["after"])
        getattr(b.stream("left"), s["kind"])(b.stream("right"), _joiner, windows, name="j").to("out")
    elif op == "stream_agg":
        _stream_aggregated(b.stream("in"), s).to_stream().to("out")
    elif op == "table_ops":
        _table_ops(b.table("table"), s["shape"]).to_stream().to("out")
    elif op == "table_join":
        left = b.table("left")
        if s["filtered"]:
            left = left.filter(lambda k, v: _passes(v))
        getattr(left, s["kind"])(b.table("right"), _joiner, name="j").to_stream().to("out")
    elif op == "table_agg":
        _table_aggregated(b.table("table"), s["agg"]).to_stream().to("out")
    else:
        raise ValueError(f"unknown conformance operator {op!r}; expected one of session, time_window, "
                         f"stream_table, stream_stream, stream_agg, table_ops, table_join, table_agg")
    return b.build()


def _format(key: Any, value: Any, ts: int) -> list[Any]:
    if isinstance(key, Windowed):
        key = f"{key.key}@{key.start}@{key.end}"
    if isinstance(value, int):
        value = str(value)
    return [key, value, ts]


def run(s: dict[str, Any], inputs: list[list[Any]] | None = None,
        adjust: Callable[[TopologyTestDriver], None] | None = None,
        erase: dict[int, tuple[str, Any, int]] | None = None) -> Steps:
    """Per input record of ``s`` (or of ``inputs`` instead), the outputs it caused; ``adjust`` is
    called with the driver before the first record (the classifiers' counterfactual runs).

    ``erase`` (counterfactual runs): ``{input index: (store, key, timestamp)}``: instead of piping
    that record, restart from the changelogs without the records of ``key`` at ``timestamp`` in
    ``store`` (as if that version had never been written); the record's step is empty."""
    steps: Steps = []
    topo = topology(s)
    d = TopologyTestDriver(topo)
    try:
        if adjust is not None:
            adjust(d)
        out = d.output_topic("out")
        for i, (topic, key, value, ts) in enumerate(s["inputs"] if inputs is None else inputs):
            if erase and i in erase:
                store, erased_key, erased_ts = erase[i]
                changelogs = d.changelogs()
                (spec,) = [x for sub in topo.subtopologies_for(d.application_id) for x in sub.stores
                           if x.name == store]
                key_bytes = spec.key_serde.serialize(erased_key, "erase")
                changelogs[store] = [r for r in changelogs[store]
                                     if not (r.key == key_bytes and r.timestamp == erased_ts)]
                d.close()
                d = TopologyTestDriver(topo, changelogs=changelogs)
                out = d.output_topic("out")
                steps.append([])
                continue
            d.input_topic(topic).pipe(key, value, ts)
            steps.append([_format(r.key, r.value, r.timestamp) for r in out.read_records()])
    finally:
        d.close()
    return steps
