"""Checks of the daemon test helpers (:mod:`tests.support.daemon`)."""

from __future__ import annotations

from streamproc.engine.partitioning import partition_for
from tests.support.daemon import expected_by_partition


def test_expected_by_partition_splits_by_key_partition() -> None:
    """The per-partition expectation runs each key's records through its partition's driver only."""
    from topologies import sessions

    gap = sessions.GAP_MS
    inputs = [("clicks", "u1", {"page": "/"}, 1_000), ("clicks", "u2", {"page": "/"}, 2_000),
              ("clicks", "u1", {"page": "/"}, 1_000 + 10 * gap)]
    got = expected_by_partition(sessions.build, inputs, sessions.OUTPUT, 8)
    p1, p2 = partition_for(b"u1", 8), partition_for(b"u2", 8)
    assert p1 != p2
    # u1's second click closes u1's first session in u1's partition; u2's partition never advances
    assert got[p1] == [("u1", {"user": "u1", "start": 1_000, "end": 1_000, "clicks": 1, "duration_ms": 0}, 1_000)]
    assert got[p2] == []
