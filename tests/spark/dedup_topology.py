"""topologies/dedup.py (a user processor with a store and a stream-time purge) on ``clicks``, with a
window and purge interval small enough for the test input (clicks 1 ms apart, up to 200 ms out of
order), for the Spark reprocessing test."""

from __future__ import annotations

from typing import Any

from topologies import dedup

WINDOW_MS = 300
PURGE_MS = 100


def build() -> Any:
    return dedup.build(WINDOW_MS, PURGE_MS, input="clicks", output="unique-clicks")


topology = build()
