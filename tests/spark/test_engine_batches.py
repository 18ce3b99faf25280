"""The executor loop on Arrow batches (:func:`streamproc.spark.engine.process_batches`) without
Spark: the same outputs as the Tasks run record by record in plain Python, whatever the batch
boundaries (a task partition spread over batches, several task partitions in one batch), with a
record that cannot be deserialised rejected in the middle of a run and the run going on."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from streamproc.spark.engine import OUT_FIELDS, StagePlan, arrow_out_schema, process_batches
from streamproc.spark.ordering import offset_order
from tests.support.spark import Out, gen_sessions_input, run_reference
from topologies import sessions

P = 3


def _input() -> tuple[list, pa.Table, int]:
    recs = gen_sessions_input(30_000, partitions=P, step_ms=2_000)
    bad = next(i for i, r in enumerate(recs) if r.partition == 1 and r.offset == 5_000)
    recs[bad] = recs[bad]._replace(value=b"{not json")
    ordered = [r for p in range(P) for r in offset_order([x for x in recs if x.partition == p])]
    table = pa.table({
        "topic": pa.array([r.topic for r in ordered]), "partition": pa.array([r.partition for r in ordered], pa.int32()),
        "offset": pa.array([r.offset for r in ordered], pa.int64()),
        "timestamp": pa.array([r.timestamp for r in ordered], pa.int64()),
        "key": pa.array([r.key for r in ordered], pa.binary()), "value": pa.array([r.value for r in ordered], pa.binary()),
        "source": pa.array(["gen"] * len(ordered)),
    })
    return recs, table, bad


@pytest.mark.parametrize("batch_rows", [3, 4_096, 100_000])
def test_batches_give_the_outputs_of_record_by_record_tasks(batch_rows: int) -> None:
    recs, table, _ = _input()
    ref, rejected = run_reference(sessions.build(), recs, application_id="sessions")
    assert rejected == 1
    plan = StagePlan("topologies.sessions", "sessions", 0)
    batches = list(process_batches(plan, table.to_batches(max_chunksize=batch_rows)))
    assert all(b.schema == arrow_out_schema() for b in batches)
    rows = pa.Table.from_batches(batches).to_pylist()
    assert all(list(r) == list(OUT_FIELDS) for r in rows)
    assert [Out(r["topic"], r["key"], r["value"], r["timestamp"]) for r in rows if r["kind"] == "out"] == ref
    assert [r["offset"] for r in rows if r["kind"] == "out"] == [
        i for p in range(P) for i in range(sum(1 for r in rows if r["kind"] == "out" and r["partition"] == p))]
    [reject] = [r for r in rows if r["kind"] == "reject"]
    assert (reject["partition"], reject["offset"], reject["value"], reject["source"]) == (1, 5_000, b"{not json", "gen")
    assert reject["info"].startswith("SerializationError")
    metrics = {r["partition"]: json.loads(r["info"]) for r in rows if r["kind"] == "metrics"}
    assert sorted(metrics) == list(range(P))
    assert sum(m["records_in"] for m in metrics.values()) == len(recs)
    assert metrics[1]["rejected"] == 1 and metrics[0]["rejected"] == 0

