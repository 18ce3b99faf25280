"""A test topology whose joiner fails on one record only when it is released from the grace buffer,
for the Spark reject test of records released from buffers (docs/semantics.md, "Errors in records
released from buffers").

``payments`` (key: currency, value JSON ``{"amount": ...}``) left-joined as of their timestamp with
the versioned table ``rates`` (history 1 s) with grace 100 ms; the joiner raises on a payment with
``"bad": true``. Results go to ``priced``.
"""

from __future__ import annotations

from typing import Any

from streamproc import serde
from streamproc.dsl.builder import StreamsBuilder


def _price(payment: Any, rate: Any) -> Any:
    if payment.get("bad"):
        raise ValueError("a bad payment")
    return {"amount": payment["amount"], "rate": rate}


def build():  # type: ignore[no-untyped-def]
    b = StreamsBuilder()
    rates = b.table("rates", key_serde=serde.STRING, value_serde=serde.JSON, name="rates", versioned=1_000)
    (b.stream("payments", key_serde=serde.STRING, value_serde=serde.JSON)
     .left_join(rates, _price, grace=100, name="priced")
     .to("priced", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()
