"""kill -9 of the daemon at random points, then restart (the short CI version of
``scripts/fault/harness.py``): at-least-once loses no input; exactly-once output read
read_committed equals the TopologyTestDriver's exactly (no duplicates); under exactly-once the
final state of every store, rebuilt from its changelog, equals the driver's.

``STREAMPROC_FAULT_RECORDS`` / ``STREAMPROC_FAULT_KILLS`` / ``STREAMPROC_FAULT_SEED`` change the size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.durability import harness

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RECORDS = int(os.environ.get("STREAMPROC_FAULT_RECORDS", "30000"))
KILLS = int(os.environ.get("STREAMPROC_FAULT_KILLS", "2"))
SEED = int(os.environ.get("STREAMPROC_FAULT_SEED", "0")) or None


@pytest.mark.parametrize("guarantee, seed", [("at_least_once", 11), ("exactly_once_v2", 12)])
async def test_kill_9_and_restart(kafka_bootstrap: str, tmp_path: Path, guarantee: str, seed: int) -> None:
    h = harness()
    cfg = h.FaultConfig(records=RECORDS, kills=KILLS, guarantee=guarantee, seed=SEED or seed,
                        min_kill_s=2.0, max_kill_s=6.0, workdir=tmp_path)
    report = await h.run_fault_test(kafka_bootstrap, cfg)
    print(report.summary())
    assert len(report.kills) == KILLS
    assert report.final_exit_code == 0
    assert report.lost_inputs == {"clicks": 0, "payments": 0}, report.summary()
    assert report.outputs["sessions"] > RECORDS // 5 and report.outputs["payments"] > RECORDS // 4
    if guarantee == "exactly_once_v2":
        assert report.duplicates == {"sessions": 0, "payments": 0}, report.summary()
        assert report.missing == {"sessions": 0, "payments": 0}, report.summary()
        assert report.unexpected == {"sessions": 0, "payments": 0}, report.summary()
        assert report.session_partitions_equal == cfg.partitions, report.summary()
        assert report.stores_equal == report.stores_checked > 0, report.summary()
    else:
        assert report.missing == {"sessions": 0, "payments": 0} or any(report.unexpected.values()), report.summary()
    assert report.ok, report.summary()
    assert sum(report.restored_records[1:]) > 0  # the restarts rebuilt state from the changelogs
