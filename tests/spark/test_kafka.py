"""Kafka as source and destination of reprocessing (real broker from the shared fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamproc.spark.job import compute, reprocess
from tests.support.kafka import Out as Produce
from tests.support.kafka import consume_all, produce
from tests.support.spark import (
    frame_table,
    frame_updates,
    gen_currency_input,
    gen_sessions_input,
    run_reference,
    write_jsonl,
)
from topologies import currency

from .conftest import spark_records

pytestmark = pytest.mark.kafka

P = 4
# the generated records carry 2023 timestamps: keep the broker's time retention from deleting them
KEEP = {"retention.ms": "-1"}


async def _load(bootstrap: str, topic: str, records) -> None:
    await produce(bootstrap, topic, [Produce(r.key, r.value, r.timestamp, (), r.partition) for r in records],
                  linger_ms=20, max_batch_size=512 * 1024)


async def test_kafka_and_file_sources_give_the_same_result(spark, kafka_bootstrap, topic_factory,
                                                           tmp_path: Path) -> None:
    recs = gen_currency_input(spark_records(), partitions=P, seed=31)
    rates = [r for r in recs if r.topic == "rates"]
    payments = [r for r in recs if r.topic == "payments"]
    rates_topic = await topic_factory(partitions=P, prefix="rates", configs=KEEP)
    payments_topic = await topic_factory(partitions=P, prefix="payments", configs=KEEP)
    await _load(kafka_bootstrap, rates_topic, rates)
    await _load(kafka_bootstrap, payments_topic, payments)
    write_jsonl(tmp_path / "rates.jsonl", rates)
    write_jsonl(tmp_path / "payments.jsonl", payments)

    results = {}
    for name, inputs in {
        "kafka": [f"rates=kafka:{rates_topic}", f"payments=kafka:{payments_topic}"],
        "files": [f"rates={tmp_path / 'rates.jsonl'}", f"payments={tmp_path / 'payments.jsonl'}"],
    }.items():
        comp = compute(spark, "topologies.currency", inputs, order="offset", bootstrap_servers=kafka_bootstrap,
                       application_id="currency", quiet=True)
        try:
            results[name] = (frame_updates(comp.updates), comp.result.records_in, comp.result.rejected)
        finally:
            comp.unpersist()
    assert results["kafka"] == results["files"]
    assert results["kafka"][1:] == (len(recs), 0)
    ref, _ = run_reference(currency.build(), recs, order="offset", application_id="currency", tables=["rates"])
    assert results["kafka"][0] == sorted(ref, key=lambda u: u.topic)


async def test_table_written_to_kafka_and_rejects_from_a_kafka_source(spark, kafka_bootstrap, topic_factory,
                                                                      tmp_path: Path) -> None:
    recs = gen_sessions_input(20_000, partitions=P, seed=13)
    bad = recs[500]._replace(value=b"\x00 not json")
    recs = recs[:500] + [bad] + recs[501:]
    clicks = await topic_factory(partitions=P, prefix="clicks", configs=KEEP)
    out = await topic_factory(partitions=P, prefix="session-stats-out", configs=KEEP)
    await _load(kafka_bootstrap, clicks, recs)
    rejects = tmp_path / "rejects"
    res = reprocess(spark, "topologies.sessions", [f"clicks=kafka:{clicks}"], f"kafka:{out}",
                    bootstrap_servers=kafka_bootstrap, rejects=str(rejects), quiet=True)
    assert (res.records_in, res.rejected) == (len(recs), 1)
    assert res.rejects_path == str(rejects) and list(rejects.glob("*.json"))
    written = await consume_all(kafka_bootstrap, out, timeout=120)  # up to the end offsets: save() flushed
    assert len(written) == res.table_rows > 0
    headers = dict(written[0].headers)
    assert headers["streamproc.topic"] == b"session-stats"
    got = {m.key: (m.value, int(dict(m.headers)["streamproc.timestamp"])) for m in written}
    comp = compute(spark, "topologies.sessions", [f"clicks=kafka:{clicks}"], bootstrap_servers=kafka_bootstrap,
                   quiet=True)
    try:
        expected = {k: v for (t, k), v in frame_table(comp.table).items()}
    finally:
        comp.unpersist()
    assert got == expected


def test_a_missing_input_topic_is_one_line_before_spark_starts(kafka_bootstrap, tmp_path: Path) -> None:
    """The real command as a subprocess: status 2 and one line naming the topic and the bootstrap
    servers; no Spark (no JVM output, no traceback)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    missing = "no-such-clicks-topic"
    out = subprocess.run([sys.executable, "-m", "streamproc.cli", "reprocess", "topologies.sessions", "--input",
                          f"clicks=kafka:{missing}", "--bootstrap-servers", kafka_bootstrap, "--output",
                          str(tmp_path / "out")], cwd=repo, capture_output=True, text=True, timeout=120,
                         check=False)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2, out.stderr[-3000:]
    assert lines == [(f"streamproc reprocess: error: input topic(s) '{missing}' do not exist on {kafka_bootstrap}; "
                      f"create them or fix --input")], lines[:20]
