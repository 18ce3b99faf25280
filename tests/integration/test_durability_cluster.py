"""On the 3-broker cluster (every topic replication factor 3, min.insync.replicas=2): kill -9 one
broker in the middle of a run and restart it 7 s later (the cluster notices after 3 s); the daemon keeps processing and
nothing is lost (and under exactly-once nothing is duplicated either)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.durability import harness

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(300)]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_broker_killed_mid_run(kafka_cluster: Any, tmp_path: Path, guarantee: str) -> None:
    h = harness()
    cfg = h.FaultConfig(records=16_000, kills=1, guarantee=guarantee, seed=21, min_kill_s=4.0, max_kill_s=6.0,
                        target="broker", broker_down_s=7.0, replication=3,
                        topic_configs={"min.insync.replicas": "2"}, workdir=tmp_path)
    report = await h.run_fault_test(kafka_cluster.bootstrap, cfg, cluster=kafka_cluster)
    print(report.summary())
    assert len(report.kills) == 1 and report.final_exit_code == 0
    assert report.kills[0]["committed_while_down"] > 0, report.summary()  # processing went on
    assert report.lost_inputs == {"clicks": 0, "payments": 0}, report.summary()
    if guarantee == "exactly_once_v2":
        assert report.duplicates == {"sessions": 0, "payments": 0}, report.summary()
        assert report.missing == {"sessions": 0, "payments": 0}, report.summary()
        assert report.stores_equal == report.stores_checked > 0, report.summary()
    assert report.ok, report.summary()
