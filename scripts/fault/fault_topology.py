"""The topology the fault harness runs: every kind of durable state in one application.

- clicks -> session windows (count, emitted on window close: a session store plus the operator's
  emit progress) -> ``sessions_out``;
- rates -> a versioned table; payments -> re-keyed by currency (a repartition topic) -> left join
  with the table with a grace period (a buffer store plus its progress) -> ``payments_out``.

``streamproc run scripts.fault.fault_topology`` takes the topic names from ``FAULT_CLICKS``, ``FAULT_RATES``,
``FAULT_PAYMENTS``, ``FAULT_SESSIONS_OUT`` and ``FAULT_PAYMENTS_OUT``; the harness builds the same
topology with :func:`build_for` to compute the expected results with the TopologyTestDriver.
"""

from __future__ import annotations

import os
from typing import Any

from streamproc import serde
from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder, Topology
from streamproc.records import Windowed

GAP_MS = 20_000
GRACE_MS = 5_000
HISTORY_MS = 3_600_000
JOIN_GRACE_MS = 5_000
SESSION_STORE = "sessions"


def session_stats(window: Windowed, clicks: Any) -> tuple[str, dict[str, Any]]:
    return window.key, {"user": window.key, "start": window.start, "end": window.end, "clicks": clicks}


def convert(payment: dict[str, Any], rate: float | None) -> dict[str, Any]:
    amount_eur = None if rate is None else round(payment["amount"] * rate, 2)
    return {**payment, "rate": rate, "amount_eur": amount_eur}


def build_for(clicks: str, rates: str, payments: str, sessions_out: str, payments_out: str) -> Topology:
    b = StreamsBuilder()
    (b.stream(clicks, key_serde=serde.STRING, value_serde=serde.JSON)
      .group_by_key()
      .windowed_by(SessionWindows.of_inactivity_gap_and_grace(GAP_MS, GRACE_MS))
      .count(name=SESSION_STORE, emit=EmitStrategy.ON_WINDOW_CLOSE)
      .to_stream()
      .map(session_stats, name="session-stats")
      .to(sessions_out, key_serde=serde.STRING, value_serde=serde.JSON))
    table = b.table(rates, name="rates", versioned=HISTORY_MS, key_serde=serde.STRING, value_serde=serde.JSON)
    (b.stream(payments, key_serde=serde.STRING, value_serde=serde.JSON)
      .select_key(lambda payment_id, payment: payment["currency"], name="by-currency")
      .left_join(table, convert, grace=JOIN_GRACE_MS, name="convert")
      .map(lambda currency, converted: (converted["id"], converted), name="by-payment-id")
      .to(payments_out, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def build() -> Topology:
    env = os.environ
    return build_for(env["FAULT_CLICKS"], env["FAULT_RATES"], env["FAULT_PAYMENTS"], env["FAULT_SESSIONS_OUT"],
                     env["FAULT_PAYMENTS_OUT"])
