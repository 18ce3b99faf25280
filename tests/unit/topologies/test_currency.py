"""topologies/currency.py (the KIP-889 example) through the TopologyTestDriver."""

from __future__ import annotations

from streamproc.records import Record
from streamproc.testing import TopologyTestDriver
from topologies import currency


def _payment(pid, amount, cur):
    return {"id": pid, "amount": amount, "currency": cur}


def test_payments_are_converted_at_the_rate_valid_at_their_time() -> None:
    with TopologyTestDriver(currency.build(grace=None), application_id="currency") as d:
        rates, payments = d.input_topic("rates"), d.input_topic("payments")
        rates.pipe("USD", 0.90, 1_000)
        rates.pipe("USD", 0.95, 3_000)
        rates.pipe("USD", 0.92, 2_000)               # out of order: valid in [2000, 3000)
        payments.pipe("p1", _payment("p1", 100, "USD"), 1_500)
        payments.pipe("p2", _payment("p2", 100, "USD"), 2_500)
        payments.pipe("p3", _payment("p3", 100, "USD"), 3_500)
        payments.pipe("p4", _payment("p4", 10, "GBP"), 3_600)
        out = d.output_topic("payments-eur").read_records()
    assert out == [
        Record("p1", {**_payment("p1", 100, "USD"), "rate": 0.90, "amount_eur": 90.0}, 1_500),
        Record("p2", {**_payment("p2", 100, "USD"), "rate": 0.92, "amount_eur": 92.0}, 2_500),
        Record("p3", {**_payment("p3", 100, "USD"), "rate": 0.95, "amount_eur": 95.0}, 3_500),
        Record("p4", {**_payment("p4", 10, "GBP"), "rate": None, "amount_eur": None}, 3_600),
    ]


def test_grace_lets_a_late_rate_apply_to_earlier_payments() -> None:
    with TopologyTestDriver(currency.build(grace=5_000), application_id="currency") as d:
        rates, payments = d.input_topic("rates"), d.input_topic("payments")
        rates.pipe("USD", 0.90, 0)
        payments.pipe("p1", _payment("p1", 10, "USD"), 10_000)   # buffered until stream time 15000
        rates.pipe("USD", 0.80, 9_000)                            # arrives after the payment
        out = d.output_topic("payments-eur")
        assert out.read_records() == []
        payments.pipe("p2", _payment("p2", 10, "USD"), 15_000)   # releases p1; p2 waits for 20000
        assert out.read_records() == [
            Record("p1", {**_payment("p1", 10, "USD"), "rate": 0.80, "amount_eur": 8.0}, 10_000)]
        assert len(d.key_value_store("convert-buffer")) == 1
        sub_topics = {t for s in currency.build().subtopologies_for("currency") for t in s.repartition_topics}
        assert sub_topics == {"currency-convert-repartition"}


def test_module_documents_topics_and_uses_kafka_serdes() -> None:
    for word in ("rates", "payments", "payments-eur", "JSON"):
        assert word in currency.__doc__
    topology = currency.build()
    assert topology.source_topics() == {"rates", "payments", "convert-repartition"}
    assert [s.name for s in topology.sink_serdes("payments-eur")] == ["string", "json"]
    assert [s.name for s in topology.source_serdes("rates")] == ["string", "json"]
