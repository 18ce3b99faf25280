"""Prometheus metrics of the daemon, on a private registry, served on ``/metrics``.

Every :class:`StreamApp` owns one :class:`Metrics` (its own ``CollectorRegistry``, so several
apps can live in one process). The HTTP endpoint runs only when ``metrics_port`` is non-zero.

Exported series (all prefixed ``streamproc_``):

==============================================  ====================================================
``records_in_total{topic,partition}``           input records handed to tasks
``records_out_total{topic}``                    records sent to output/repartition topics
``changelog_records_total{topic}``              records sent to changelog topics
``dropped_records_total{operator,reason}``      records dropped (operators' reasons, error policies)
``enforced_processing_total``                   runs processed without waiting longer for a lagging input
``dead_lettered_total{stage,operator}``         records sent to the dead-letter topic
``processing_latency_seconds``                  time to run one partition batch through its task
``commit_latency_seconds``                      time of one commit (flush, wait for acks, commit)
``commits_total``                               successful offset commits
``pending_acks``                                sends not yet acknowledged by the brokers
``consumer_lag{topic,partition}``               high watermark minus the next offset to process (from assignment)
``restore_remaining_records{topic,partition}``  changelog records left to replay
``restored_records_total{topic}``               changelog records replayed
``tasks{state}``                                tasks by state (restoring, running)
``task_failures_total{reason}``                 tasks failed and restarted
==============================================  ====================================================
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .service import Service

__all__ = ["Metrics"]

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics(Service):
    """The daemon's metrics and, when ``port`` is set, their HTTP endpoint."""

    label = "metrics"

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        super().__init__()
        self.port = port
        self.host = host
        self.registry = CollectorRegistry()
        r = self.registry
        self.records_in = Counter("streamproc_records_in", "Input records handed to tasks",
                                  ["topic", "partition"], registry=r)
        self.records_out = Counter("streamproc_records_out", "Records sent to output and repartition topics",
                                   ["topic"], registry=r)
        self.changelog_records = Counter("streamproc_changelog_records", "Records sent to changelog topics",
                                         ["topic"], registry=r)
        self.dropped = Counter("streamproc_dropped_records", "Records dropped, by operator and reason",
                               ["operator", "reason"], registry=r)
        self.enforced_processing = Counter(
            "streamproc_enforced_processing", "Runs of records a task processed while a lagging input had "
            "nothing buffered (it waited max_task_idle_ms)", registry=r)
        self.dead_lettered = Counter("streamproc_dead_lettered", "Records sent to the dead-letter topic, by "
                                     "stage and operator (the source topic for records that did not deserialize)",
                                     ["stage", "operator"], registry=r)
        self.processing_latency = Histogram("streamproc_processing_latency_seconds",
                                            "Time to run one partition batch through its task",
                                            buckets=_LATENCY_BUCKETS, registry=r)
        self.commit_latency = Histogram("streamproc_commit_latency_seconds",
                                        "Time of one commit (flush changelogs, wait for acks, commit offsets)",
                                        buckets=_LATENCY_BUCKETS, registry=r)
        self.commits = Counter("streamproc_commits", "Successful offset commits", registry=r)
        self.pending_acks = Gauge("streamproc_pending_acks", "Sends not yet acknowledged by the brokers",
                                  registry=r)
        self.lag = Gauge("streamproc_consumer_lag", "High watermark minus next offset to process",
                         ["topic", "partition"], registry=r)
        self.restore_remaining = Gauge("streamproc_restore_remaining_records", "Changelog records left to replay",
                                       ["topic", "partition"], registry=r)
        self.restored = Counter("streamproc_restored_records", "Changelog records replayed", ["topic"], registry=r)
        self.standby_lag = Gauge("streamproc_standby_lag", "A standby's changelog end offset minus its next offset",
                                 ["topic", "partition"], registry=r)
        self.standby_records = Counter("streamproc_standby_records", "Changelog records applied by standby tasks",
                                       ["topic"], registry=r)
        self.rebalances = Counter("streamproc_rebalances", "Partition assignments received from the group "
                                  "(each rebalance counts once)", registry=r)
        self.tasks = Gauge("streamproc_tasks", "Tasks by state (running, restoring, suspended, standby)", ["state"],
                           registry=r)
        self.task_failures = Counter("streamproc_task_failures", "Tasks failed and restarted", ["reason"],
                                     registry=r)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    async def on_start(self) -> None:
        if self.port:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
            log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def on_stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples ``name`` whose labels include ``labels`` (for tests and logs);
        0.0 when there is none."""
        total = 0.0
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total
