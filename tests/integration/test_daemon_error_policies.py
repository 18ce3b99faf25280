"""A malformed record (bad JSON) and a record a user function fails on, under each error policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.runtime.app import RecordError
from tests.support.daemon import (
    committed_offsets,
    read_topic,
    recent_base_ts,
    running_app,
    wait_until,
)
from tests.support.kafka import Out, end_offsets, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

BAD_BYTES = b'{"n": 3, oops'
BASE = recent_base_ts(0)


def topology(source: str, sink: str) -> Any:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        if value["n"] == 13:
            raise ValueError("13 is unlucky")
        return {**value, "double": 2 * value["n"]}

    b = StreamsBuilder()
    (b.stream(source, key_serde=serde.STRING, value_serde=serde.JSON)
      .map_values(check, name="check")
      .to(sink, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


async def setup(bootstrap: str, topic_factory: Any) -> tuple[str, str, list[Any]]:
    source = await topic_factory(1, prefix="in")
    sink = unique_name("out")
    records = [Out(f"k{i}".encode(), json.dumps({"n": i}).encode(), BASE + i) for i in range(20)]
    records[5] = Out(b"k5", BAD_BYTES, BASE + 5, headers=[("origin", b"test")])
    meta = await produce(bootstrap, source, records)
    return source, sink, meta


def good_values(got: list[Any]) -> list[int]:
    return sorted(json.loads(r.value)["n"] for r in got)


async def test_skip(kafka_bootstrap: str, topic_factory: Any) -> None:
    source, sink, _ = await setup(kafka_bootstrap, topic_factory)
    app_id = unique_name("skip")
    async with running_app(topology(source, sink), kafka_bootstrap, app_id, wait_tasks=1,
                           deserialization_error_policy="skip", processing_error_policy="skip") as app:
        got = await read_topic(kafka_bootstrap, sink, 18, timeout=60)
        await wait_until(lambda: app.committer.committed.get(_tp(source), 0) == 20, 30, "commit of all 20")
        assert app.metrics.value("streamproc_dropped_records_total", reason="deserialization_error") == 1
        assert app.metrics.value("streamproc_dropped_records_total", reason="processing_error") == 1
    assert good_values(got) == [i for i in range(20) if i not in (5, 13)]
    assert await committed_offsets(kafka_bootstrap, app_id, source, 1) == {0: 20}


async def test_dead_letter(kafka_bootstrap: str, topic_factory: Any) -> None:
    source, sink, meta = await setup(kafka_bootstrap, topic_factory)
    app_id = unique_name("dlq")
    async with running_app(topology(source, sink), kafka_bootstrap, app_id, wait_tasks=1,
                           deserialization_error_policy="dead-letter", processing_error_policy="dead-letter") as app:
        got = await read_topic(kafka_bootstrap, sink, 18, timeout=60)
        dead = await read_topic(kafka_bootstrap, f"{app_id}-dlq", 2, timeout=60)
        await wait_until(lambda: app.committer.committed.get(_tp(source), 0) == 20, 30, "commit of all 20")
    assert good_values(got) == [i for i in range(20) if i not in (5, 13)]
    assert len(dead) == 2
    by_offset = {int(dict(r.headers)["streamproc.error.offset"]): r for r in dead}
    bad = by_offset[meta[5].offset]
    assert (bad.key, bad.value, bad.timestamp) == (b"k5", BAD_BYTES, BASE + 5)
    h = dict(bad.headers)
    assert h["origin"] == b"test"
    assert h["streamproc.error.stage"] == b"deserialization"
    assert h["streamproc.error.class"] == b"SerializationError"
    assert h["streamproc.error.topic"] == source.encode() and h["streamproc.error.partition"] == b"0"
    assert b"json" in h["streamproc.error.message"]
    unlucky = by_offset[meta[13].offset]
    assert json.loads(unlucky.value) == {"n": 13}
    assert dict(unlucky.headers)["streamproc.error.stage"] == b"processing"
    assert b"13 is unlucky" in dict(unlucky.headers)["streamproc.error.message"]
    assert await committed_offsets(kafka_bootstrap, app_id, source, 1) == {0: 20}


async def test_fail(kafka_bootstrap: str, topic_factory: Any) -> None:
    source, sink, meta = await setup(kafka_bootstrap, topic_factory)
    app_id = unique_name("fail")
    with pytest.raises(RecordError, match=rf"deserialization error on record {source}\[0\]@{meta[5].offset}.*"
                                          r"deserialization_error_policy=fail") as info:
        async with running_app(topology(source, sink), kafka_bootstrap, app_id) as app:
            await wait_until(lambda: app.fatal is not None, 60, "the app to fail")
    assert str(info.value).count(f"{source}[0]@{meta[5].offset}") == 1, str(info.value)  # the position, once
    # the bad record's offset was not committed: a restart meets it again
    committed = (await committed_offsets(kafka_bootstrap, app_id, source, 1))[0]
    assert committed <= meta[5].offset
    assert (await end_offsets(kafka_bootstrap, source))[0] == 20


def _tp(topic: str) -> Any:
    from aiokafka import TopicPartition

    return TopicPartition(topic, 0)


def released_topology(payments: str, rates: str, sink: str) -> Any:
    """Payments left-joined as of a versioned rates table with a 10 ms grace; the joiner fails on
    ``{"bad": true}`` - which it meets only when the join releases that payment from its buffer."""
    def joiner(payment: dict[str, Any], rate: Any) -> dict[str, Any]:
        if payment.get("bad"):
            raise ValueError("cannot convert a bad payment")
        return {**payment, "rate": rate}

    b = StreamsBuilder()
    table = b.table(rates, key_serde=serde.STRING, value_serde=serde.JSON, name="rates", versioned=1_000)
    (b.stream(payments, key_serde=serde.STRING, value_serde=serde.JSON)
      .left_join(table, joiner, grace=10, name="convert")
      .to(sink, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


@pytest.mark.parametrize("policy", ["dead-letter", "skip", "fail"])
async def test_a_record_failing_on_release_from_a_grace_buffer_is_the_one_blamed(
        kafka_bootstrap: str, topic_factory: Any, policy: str) -> None:
    payments, rates = await topic_factory(1, prefix="pay"), await topic_factory(1, prefix="rates")
    sink = unique_name("out")
    await produce(kafka_bootstrap, rates, [Out(b"k", b"1.5", BASE + 5)])
    bad_value = b'{"bad": true, "n": 2}'
    meta = await produce(kafka_bootstrap, payments, [
        Out(b"k", b'{"n": 1}', BASE + 10),
        Out(b"k", bad_value, BASE + 11, headers=[("trace", b"t-2")]),
        Out(b"k", b'{"n": 3}', BASE + 100),  # releases both buffered payments (stream time - grace > 11)
    ])
    app_id = unique_name("released")
    topology = released_topology(payments, rates, sink)
    if policy == "fail":
        with pytest.raises(RecordError) as info:
            async with running_app(topology, kafka_bootstrap, app_id, wait_tasks=1, processing_error_policy=policy):
                await wait_until(lambda: False, 60, "the fatal error")
        assert f"{payments}[0]@{meta[1].offset}" in str(info.value)
        assert "released from a join buffer" in str(info.value)
        return
    async with running_app(topology, kafka_bootstrap, app_id, wait_tasks=1, processing_error_policy=policy) as app:
        got = await read_topic(kafka_bootstrap, sink, 1, timeout=60)
        await wait_until(lambda: app.committer.committed.get(_tp(payments), 0) == 3, 30, "commit of all 3")
        if policy == "skip":
            await wait_until(lambda: app.metrics.value("streamproc_dropped_records_total",
                                                       reason="processing_error") == 1, 30, "the drop")
            assert app.metrics.value("streamproc_dropped_records_total", operator="convert",
                                     reason="processing_error") == 1
    assert [json.loads(r.value) for r in got] == [{"n": 1, "rate": 1.5}]
    if policy == "dead-letter":
        dead = await read_topic(kafka_bootstrap, f"{app_id}-dlq", 1, timeout=60)
        assert len(dead) == 1
        r = dead[0]
        assert (r.key, r.value, r.timestamp) == (b"k", bad_value, BASE + 11)
        h = dict(r.headers)
        assert h["trace"] == b"t-2"
        assert (h["streamproc.error.topic"], h["streamproc.error.partition"], h["streamproc.error.offset"]) == \
            (payments.encode(), b"0", str(meta[1].offset).encode())
        assert b"cannot convert a bad payment" in h["streamproc.error.message"]
