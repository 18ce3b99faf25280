"""Payments converted to EUR at the exchange rate valid at the payment's time (the KIP-889 example).

Topics and formats (string keys, JSON values):

- input ``rates`` (a versioned table): key = currency code (``"USD"``), value = JSON number, the
  price of one unit in EUR (``0.92``); timestamp = when the rate became valid. A null value
  (tombstone) means "no rate from then on". EUR itself needs a rate (``1``) like any other currency.
- input ``payments``: key = payment id, value = ``{"id": str, "amount": number, "currency": str}``,
  timestamp = payment time.
- output ``payments-eur``: key = payment id, value = the payment plus ``"rate"`` (the rate valid at the
  payment's timestamp, or null when none is known) and ``"amount_eur"`` (``amount * rate`` rounded to
  cents, or null), timestamp = payment time.

How: payments are re-keyed by currency (through the repartition topic
``<application_id>-convert-repartition``) and left-joined with the versioned ``rates`` table
(history retention 1 hour by default), with a grace period (default 5 s) so a rate that arrives a
little after the payments it applies to is still used.

Run: ``streamproc run topologies.currency --bootstrap-servers localhost:9092 --application-id currency``.
"""

from __future__ import annotations

from typing import Any

from streamproc import serde
from streamproc.dsl import StreamsBuilder, Topology
from streamproc.time import Duration

__all__ = ["OUTPUT", "PAYMENTS", "RATES", "build", "convert"]

RATES = "rates"
PAYMENTS = "payments"
OUTPUT = "payments-eur"
HISTORY_MS = 3_600_000
GRACE_MS = 5_000


def convert(payment: dict[str, Any], rate: float | None) -> dict[str, Any]:
    """The joined output value of a payment and the rate valid at its time (None: no rate)."""
    amount_eur = None if rate is None else round(payment["amount"] * rate, 2)
    return {**payment, "rate": rate, "amount_eur": amount_eur}


def build(history: Duration = HISTORY_MS, grace: Duration | None = GRACE_MS) -> Topology:
    """The currency topology (``history``: rates history retention; ``grace``: join grace or None)."""
    b = StreamsBuilder()
    rates = b.table(RATES, name="rates", versioned=history, key_serde=serde.STRING, value_serde=serde.JSON)
    (b.stream(PAYMENTS, key_serde=serde.STRING, value_serde=serde.JSON)
      .select_key(lambda payment_id, payment: payment["currency"], name="by-currency")
      .left_join(rates, convert, grace=grace, name="convert")
      .map(lambda currency, converted: (converted["id"], converted), name="by-payment-id")
      .to(OUTPUT, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


topology = build()
