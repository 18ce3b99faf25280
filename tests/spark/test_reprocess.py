"""Reprocessing on real PySpark (local[2]) compared with the TopologyTestDriver and with Tasks run
directly in the documented order.

Sizes: ``STREAMPROC_SPARK_RECORDS`` (default 100000) records for the example topologies; the
format, reject and repartition tests use smaller inputs.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from streamproc.engine.loading import TopologyLoadError
from streamproc.spark.job import compute, reprocess
from streamproc.spark.ordering import event_time_order, offset_order
from tests.support.spark import (
    In,
    decode_with_sink_serdes,
    drive,
    final_table,
    frame_table,
    frame_updates,
    gen_clicks,
    gen_currency_input,
    gen_sessions_input,
    run_reference,
    write_jsonl,
    write_parquet,
)
from topologies import currency, sessions

from .conftest import spark_records

N = spark_records()
P = 4


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[In], Path]:
    recs = gen_sessions_input(N, partitions=P)
    return recs, write_jsonl(tmp_path_factory.mktemp("sessions") / "clicks.jsonl", recs)


@pytest.fixture(scope="module")
def currency_one_partition(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[In], Path]:
    recs = gen_currency_input(N, partitions=1)
    d = tmp_path_factory.mktemp("currency1")
    write_jsonl(d / "rates.jsonl", [r for r in recs if r.topic == "rates"])
    write_jsonl(d / "payments.jsonl", [r for r in recs if r.topic == "payments"])
    return recs, d


def _sessions_expected(recs: list[In], order: str) -> tuple[list[tuple], int]:
    """One fresh driver per partition (tasks are independent), fed that partition in ``order``."""
    topo = sessions.build()
    expected: list[tuple] = []
    dropped = 0
    for p in range(P):
        mine = [r for r in recs if r.partition == p]
        feed = offset_order(mine) if order == "offset" else event_time_order(mine)
        outs, d = drive(topo, feed, "sessions")
        expected.extend(outs)
        dropped += d
    return expected, dropped


@pytest.mark.parametrize("order", ["offset", "event-time"])
def test_sessions_equal_the_driver_fed_the_same_order(spark, clicks, order: str) -> None:
    recs, path = clicks
    comp = compute(spark, "topologies.sessions", [f"clicks={path}"], order=order, application_id="sessions",
                   quiet=True)
    try:
        got = decode_with_sink_serdes(sessions.topology, frame_updates(comp.updates), "sessions")
        table = frame_table(comp.table)
        res = comp.result
    finally:
        comp.unpersist()
    expected, dropped = _sessions_expected(recs, order)
    assert len(got) == len(expected) > N // 20
    assert got == expected
    assert res.records_in == N and res.rejected == 0
    assert res.dropped == dropped
    if order == "offset":
        assert dropped > 0, "the generated input must contain records too late for their session"
    else:
        assert dropped == 0, "event-time order recomputes without late drops"
    # session-stats keys are users: the table keeps each user's last closed session
    assert len(table) == len({(u[0], u[1]) for u in got})


@pytest.mark.parametrize("order", ["offset", "event-time"])
def test_currency_equals_the_driver_on_one_partition(spark, currency_one_partition, order: str) -> None:
    recs, d = currency_one_partition
    comp = compute(spark, "topologies.currency",
                   [f"rates=json:{d / 'rates.jsonl'}", f"payments=json:{d / 'payments.jsonl'}"],
                   order=order, application_id="currency", quiet=True)
    try:
        got = decode_with_sink_serdes(currency.topology, frame_updates(comp.updates), "currency")
        res = comp.result
    finally:
        comp.unpersist()
    feed = offset_order(recs) if order == "offset" else event_time_order(recs, ["rates"])
    expected, dropped = drive(currency.build(), feed, "currency")
    assert got == expected
    assert res.dropped == dropped
    assert res.stages == 2
    payments = sum(1 for r in recs if r.topic == "payments")
    joined = [v for _, _, v, _ in got if v["rate"] is not None]
    assert len(joined) > len(got) // 2, "most payments find a rate"
    # a left join emits every payment, except those still waiting in the grace buffer at the end
    assert payments - 100 < len(got) <= payments


def test_currency_on_four_partitions_equals_tasks_run_in_order(spark, tmp_path: Path) -> None:
    """Four partitions: the repartition hop (payments re-keyed by currency) runs as a Spark shuffle;
    the reference runs the same Tasks in plain Python with the documented merge rules."""
    recs = gen_currency_input(N // 2, partitions=P, seed=5)
    write_jsonl(tmp_path / "rates.jsonl", [r for r in recs if r.topic == "rates"])
    write_jsonl(tmp_path / "payments.jsonl", [r for r in recs if r.topic == "payments"])
    for order in ("offset", "event-time"):
        comp = compute(spark, "topologies.currency",
                       [f"rates={tmp_path / 'rates.jsonl'}", f"payments={tmp_path / 'payments.jsonl'}"],
                       order=order, application_id="currency", quiet=True)
        try:
            got = frame_updates(comp.updates)
            table = frame_table(comp.table)
        finally:
            comp.unpersist()
        ref, rejected = run_reference(currency.build(), recs, order=order, application_id="currency",
                                      tables=["rates"])
        assert rejected == 0
        assert got == sorted(ref, key=lambda u: u.topic), order
        assert table == final_table(ref)


def test_repartitioned_aggregation_equals_tasks_run_in_order(spark, tmp_path: Path) -> None:
    recs = gen_clicks(20_000, partitions=P, step=1, jitter=200)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs)
    for order in ("offset", "event-time"):
        comp = compute(spark, "tests.spark.rekey_topology", [f"clicks={path}"], order=order, quiet=True)
        try:
            got = frame_updates(comp.updates)
            res = comp.result
        finally:
            comp.unpersist()
        ref, _ = run_reference(__import__("tests.spark.rekey_topology", fromlist=["build"]).build(), recs,
                               order=order, application_id="rekey_topology")
        assert got == sorted(ref, key=lambda u: u.topic), order
        assert res.stages == 2
        if order == "offset":
            assert res.dropped > 0  # the merged repartition stream keeps the late records late
        else:
            assert res.dropped == 0


def test_table_group_by_count_equals_tasks_run_in_order(spark, tmp_path: Path) -> None:
    """KTable filter + group_by + count (change records through the repartition topic) on Spark."""
    from tests.spark import table_group_by_topology

    recs = gen_clicks(5_000, partitions=P, users=100, pages=8, step=1, jitter=200)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs)
    for order in ("offset", "event-time"):
        comp = compute(spark, "tests.spark.table_group_by_topology", [f"clicks={path}"], order=order, quiet=True)
        try:
            got = frame_updates(comp.updates)
            res = comp.result
        finally:
            comp.unpersist()
        ref, _ = run_reference(table_group_by_topology.build(), recs, order=order,
                               application_id="table_group_by_topology", tables=["clicks"])
        assert got == sorted(ref, key=lambda u: u.topic), order
        assert res.stages == 2
        assert len(got) > 5_000 // 2, "every kept click changes a page's count (and a move two)"


def test_json_text_json_base64_and_parquet_sources_agree(spark, tmp_path: Path) -> None:
    recs = gen_sessions_input(20_000, partitions=P, seed=3)
    text = write_jsonl(tmp_path / "text.jsonl", recs)
    b64 = write_jsonl(tmp_path / "b64.jsonl", recs, encoding="base64")
    parquet = write_parquet(spark, tmp_path / "clicks.parquet", recs)
    results = []
    for source, encoding in ((f"clicks={text}", "text"), (f"clicks={b64}", "base64"),
                             (f"clicks={parquet}", "text"), (f"clicks=parquet:{parquet}", "base64")):
        comp = compute(spark, "topologies.sessions", [source], encoding=encoding, quiet=True)
        try:
            results.append((frame_updates(comp.updates), comp.result.records_in, comp.result.rejected))
        finally:
            comp.unpersist()
    assert results[0][0], "sessions must come out"
    assert all(r == results[0] for r in results[1:])
    assert results[0][1:] == (len(recs), 0)


def test_unreadable_records_are_rejected_with_their_position(spark, tmp_path: Path) -> None:
    recs = gen_sessions_input(5_000, partitions=P, seed=9)
    bad_value = recs[100]._replace(value=b"{not json")
    bad_key = recs[200]._replace(key=b"\xff\xfe")  # not UTF-8: the string serde cannot read it
    good = [r for i, r in enumerate(recs) if i not in (100, 200)]
    lines = [
        "{this is not json",
        json.dumps({"key": "u1", "value": "{}", "timestamp": 5, "partition": 0}),  # no offset
        json.dumps({"key": "u1", "value": "{}", "timestamp": "soon", "partition": 0, "offset": 7}),
    ]
    path = write_jsonl(tmp_path / "in" / "clicks.jsonl", good + [bad_value], bad_lines=lines)
    b64 = write_jsonl(tmp_path / "in2" / "clicks.jsonl", [bad_key], encoding="base64",
                      bad_lines=[json.dumps({"key": "!!!", "value": None, "timestamp": 1, "partition": 0,
                                             "offset": 1})])
    out = tmp_path / "out"
    res = reprocess(spark, "topologies.sessions", [f"clicks={path}"], str(out), order="offset", quiet=True)
    assert res.records_in == len(good) + 1 + len(lines)
    assert res.rejected == 1 + len(lines)
    rejects = [json.loads(x) for f in sorted((out / "_rejects").glob("*.json")) for x in f.read_text().splitlines()]
    assert len(rejects) == res.rejected
    by_error = {r["error"].split(":")[0]: r for r in rejects}
    ser = by_error["SerializationError"]
    assert (ser["topic"], ser["partition"], ser["offset"]) == ("clicks", bad_value.partition, bad_value.offset)
    assert base64.b64decode(ser["value_base64"]) == b"{not json"
    assert sum(1 for r in rejects if r["error"].startswith("malformed record")) == 2
    assert any("offset" in r["error"] for r in rejects)
    assert all(r["source"] for r in rejects)
    # the good records give exactly what they give alone
    comp = compute(spark, "topologies.sessions", [f"clicks={write_jsonl(tmp_path / 'good.jsonl', good)}"],
                   quiet=True)
    try:
        assert res.table_rows == comp.table.count() > 0
    finally:
        comp.unpersist()
    # base64 input: an undecodable key (bad UTF-8 for the string serde) and invalid base64
    res2 = reprocess(spark, "topologies.sessions", [f"clicks={b64}"], f"json:{tmp_path / 'out2'}",
                     encoding="base64", rejects=str(tmp_path / "rej2"), quiet=True)
    assert (res2.records_in, res2.rejected, res2.table_rows) == (2, 2, 0)
    errors = sorted(json.loads(x)["error"] for f in (tmp_path / "rej2").glob("*.json")
                    for x in f.read_text().splitlines())
    assert errors[0].startswith("SerializationError") and "string serde" in errors[0]
    assert errors[1] == "key: invalid base64"


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_reprocess_writes_the_final_table_and_the_update_stream(spark, tmp_path: Path, fmt: str) -> None:
    recs = gen_sessions_input(10_000, partitions=P, seed=4)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs)
    out = tmp_path / "out"
    res = reprocess(spark, "topologies.sessions", [f"clicks={path}"], f"{fmt}:{out}", order="event-time",
                    updates=True, quiet=True)
    read = spark.read.parquet if fmt == "parquet" else spark.read.json
    updates = read(str(out / "updates")).collect()
    table = read(str(out / "table")).collect()
    assert res.records_out == len(updates) > 0 and res.table_rows == len(table) > 0
    assert res.rejects_path is None and not (out / "_rejects").exists()
    ordered = sorted(updates, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    last: dict[str, dict] = {}
    for r in ordered:  # text encoding: keys and values are the UTF-8 text of the record bytes
        last[r["key"]] = json.loads(r["value"])
    assert {r["key"]: json.loads(r["value"]) for r in table} == last
    assert all(set(json.loads(r["value"])) == {"user", "start", "end", "clicks", "duration_ms"} for r in table)
    with pytest.raises(Exception, match="already exists"):
        reprocess(spark, "topologies.sessions", [f"clicks={path}"], f"{fmt}:{out}", quiet=True)
    reprocess(spark, "topologies.sessions", [f"clicks={path}"], f"{fmt}:{out}", overwrite=True, quiet=True)


def test_bad_requests_fail_before_any_job(spark, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", gen_clicks(10))
    with pytest.raises(ValueError, match=r"source topic\(s\) \['payments'\].*no --input"):
        compute(spark, "topologies.currency", [f"rates={path}"], quiet=True)
    with pytest.raises(ValueError, match=r"\['clicks'\] are not external source topics"):
        compute(spark, "topologies.currency", [f"rates={path}", f"payments={path}", f"clicks={path}"], quiet=True)
    with pytest.raises(ValueError, match="unknown order"):
        compute(spark, "topologies.sessions", [f"clicks={path}"], order="wall-clock", quiet=True)
    with pytest.raises(ValueError, match="must be TOPIC=SOURCE"):
        compute(spark, "topologies.sessions", ["clicks"], quiet=True)
    with pytest.raises(ValueError, match="no file or directory matches"):
        compute(spark, "topologies.sessions", [f"clicks={tmp_path / 'missing.jsonl'}"], quiet=True)
    with pytest.raises(TopologyLoadError, match="no module 'topologies.no_such_module'"):
        compute(spark, "topologies.no_such_module", [f"clicks={path}"], quiet=True)


def test_a_record_failing_on_release_from_a_buffer_is_rejected_with_its_own_position_and_bytes(
        spark, tmp_path: Path) -> None:
    """Issue 19, item 3: the reject names the released payment (offset 1, its bytes), not the
    payment whose arrival released it (offset 2), and that one is still priced."""
    recs = [In("rates", 0, 0, 1, b"EUR", b"1.5"),
            In("payments", 0, 0, 10, b"EUR", b'{"amount":1}'),
            In("payments", 0, 1, 11, b"EUR", b'{"amount":2,"bad":true}'),
            In("payments", 0, 2, 500, b"EUR", b'{"amount":3}')]
    rates = write_jsonl(tmp_path / "in" / "rates.jsonl", recs[:1])
    payments = write_jsonl(tmp_path / "in" / "payments.jsonl", recs[1:])
    out = tmp_path / "out"
    res = reprocess(spark, "tests.spark.released_topology", [f"rates={rates}", f"payments={payments}"],
                    f"json:{out}", order="event-time", updates=True, quiet=True)
    assert res.rejected == 1
    (reject,) = [json.loads(x) for f in sorted((out / "_rejects").glob("*.json")) for x in f.read_text().splitlines()]
    assert (reject["topic"], reject["partition"], reject["offset"], reject["timestamp"]) == ("payments", 0, 1, 11)
    assert base64.b64decode(reject["value_base64"]) == b'{"amount":2,"bad":true}'
    assert base64.b64decode(reject["key_base64"]) == b"EUR"
    assert reject["error"].startswith("ProcessingError") and "payments[0]@1" in reject["error"]
    assert reject["source"] and "payments" in reject["source"]
    priced = sorted(json.loads(r["value"])["amount"] for r in spark.read.json(str(out / "updates")).collect())
    assert priced == [1]   # the releasing payment (500) is buffered, not yet released



def test_user_processor_dedup_equals_tasks_run_in_order(spark, tmp_path: Path) -> None:
    """A Processor API topology (user store, stream-time punctuation) reprocessed on Spark equals Tasks
    run directly in the same order."""
    from tests.spark import dedup_topology

    recs = gen_clicks(5_000, partitions=P, users=100, step=1, jitter=200)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs)
    for order in ("offset", "event-time"):
        comp = compute(spark, "tests.spark.dedup_topology", [f"clicks={path}"], order=order, quiet=True)
        try:
            got = frame_updates(comp.updates)
        finally:
            comp.unpersist()
        ref, _ = run_reference(dedup_topology.build(), recs, order=order, application_id="dedup_topology")
        assert got == sorted(ref, key=lambda u: u.topic), order
        assert 100 < len(got) < 5_000 - 100, "some clicks are duplicates, some not"


def _wordcount_input(n: int) -> list[In]:
    import random

    from tests.support.spark import assign_positions

    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)]
    rows = [("sentences", f"s{i % 97}".encode(), " ".join(rng.choice(words) for _ in range(rng.randrange(1, 6))).encode(),
             1_700_000_000_000 + i * 10 - rng.randrange(50)) for i in range(n)]
    return assign_positions(rows, P)


def _pageviews_input(n: int) -> list[In]:
    import random

    from tests.support.spark import assign_positions

    rng = random.Random(4)
    rows = []
    for i in range(n):
        user = f"u{rng.randrange(500):04d}".encode()
        ts = 1_700_000_000_000 + i * 200 - rng.randrange(30_000)
        if rng.random() < 0.3:
            rows.append(("ad-clicks", user, json.dumps({"ad": f"a{rng.randrange(40)}"}).encode(), ts))
        else:
            rows.append(("page-views", user, json.dumps({"page": f"/p{rng.randrange(60)}"}).encode(), ts))
    return assign_positions(rows, P)


@pytest.mark.parametrize("name", ["wordcount", "pageviews"])
def test_other_example_topologies_equal_tasks_run_in_order(spark, tmp_path: Path, name: str) -> None:
    """topologies.wordcount (a repartition by word, then a count) and topologies.pageviews (a
    windowed left join of two streams, a repartition by page, then windowed counts): both orders."""
    import importlib

    recs = _wordcount_input(20_000) if name == "wordcount" else _pageviews_input(20_000)
    topics = sorted({r.topic for r in recs})
    inputs = [f"{t}={write_jsonl(tmp_path / f'{t}.jsonl', [r for r in recs if r.topic == t])}" for t in topics]
    for order in ("offset", "event-time"):
        comp = compute(spark, f"topologies.{name}", inputs, order=order, application_id=name, quiet=True)
        try:
            got = frame_updates(comp.updates)
            table = frame_table(comp.table)
            res = comp.result
        finally:
            comp.unpersist()
        ref, rejected = run_reference(importlib.import_module(f"topologies.{name}").build(), recs, order=order,
                                      application_id=name)
        assert rejected == 0 and res.rejected == 0
        assert res.stages == 2
        assert got == sorted(ref, key=lambda u: u.topic), order
        assert table == final_table(ref)
        assert len(got) > 1_000
