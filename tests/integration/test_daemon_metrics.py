"""The Prometheus endpoint serves the daemon's series while it runs; port 0 serves nothing."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from typing import Any

import pytest

from tests.integration.test_daemon_error_policies import BASE, topology
from tests.support.daemon import free_port, read_topic, running_app, wait_until
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


async def test_metrics_endpoint(kafka_bootstrap: str, topic_factory: Any) -> None:
    source = await topic_factory(2, prefix="in")
    sink = unique_name("out")
    await produce(kafka_bootstrap, source, [Out(f"k{i}".encode(), json.dumps({"n": i}).encode(), BASE + i)
                                            for i in range(50)])
    port = free_port()
    async with running_app(topology(source, sink), kafka_bootstrap, unique_name("metrics"), wait_tasks=2,
                           metrics_port=port, processing_error_policy="skip") as app:
        await read_topic(kafka_bootstrap, sink, 49, timeout=60)
        await wait_until(lambda: app.metrics.value("streamproc_commits_total") > 0, 30, "a commit")
        text = await asyncio.to_thread(scrape, port)
    for series in ("streamproc_records_in_total", "streamproc_records_out_total", "streamproc_dropped_records_total",
                   "streamproc_processing_latency_seconds_bucket", "streamproc_commit_latency_seconds_count",
                   "streamproc_pending_acks", "streamproc_consumer_lag", "streamproc_tasks",
                   "streamproc_restore_remaining_records"):
        assert series in text, series
    assert f'streamproc_records_out_total{{topic="{sink}"}} 49.0' in text
    assert re.search(r'streamproc_dropped_records_total\{operator="[^"]+",reason="processing_error"\} 1\.0', text)
    with pytest.raises(OSError):
        scrape(port)  # stopped with the app
