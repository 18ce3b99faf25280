"""Checks ``streamproc reprocess`` makes before Spark starts, each failing with one line.

- the topology module loads (:func:`streamproc.engine.loading.load_topology`, the current
  directory searched first) and the ``--input`` topics are exactly its external source topics
  (:func:`streamproc.spark.job.check_inputs`);
- Kafka sources and a Kafka destination have ``--bootstrap-servers``, and every Kafka input topic
  exists there (its name and the bootstrap servers are in the message);
- an output that exists (``DEST/table``, and ``DEST/updates`` with ``--updates``) is refused unless
  ``--overwrite``.

Nothing here imports PySpark. :func:`preflight` raises :class:`PreflightError`; the command prints it
as ``streamproc reprocess: error: ...`` and exits 2.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..engine.loading import TopologyLoadError, load_topology
from ..errors import StreamprocError
from .job import check_inputs
from .sources import InputSpec, OutputSpec

__all__ = ["PreflightError", "missing_kafka_topics", "preflight"]

#: How long the Kafka check waits for the cluster's metadata (s).
METADATA_TIMEOUT_S = 15.0


class PreflightError(StreamprocError):
    """A ``reprocess`` request that cannot run; the message says what and how to fix it."""


async def _topics(bootstrap_servers: str) -> set[str]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, request_timeout_ms=10_000)
    await asyncio.wait_for(consumer.start(), METADATA_TIMEOUT_S)
    try:
        return set(await asyncio.wait_for(consumer.topics(), METADATA_TIMEOUT_S))
    finally:
        await consumer.stop()


def missing_kafka_topics(bootstrap_servers: str, topics: Sequence[str]) -> list[str]:
    """The ``topics`` that do not exist on the cluster at ``bootstrap_servers``; a
    :class:`PreflightError` when the cluster cannot be reached."""
    try:
        # in a thread of its own: the caller may itself run in an event loop (a notebook, a test)
        with ThreadPoolExecutor(1) as pool:
            existing = pool.submit(asyncio.run, _topics(bootstrap_servers)).result()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is reported the same way
        raise PreflightError(f"cannot reach Kafka at {bootstrap_servers} to read input topics "
                             f"({type(exc).__name__}: {exc}); check --bootstrap-servers") from None
    return [t for t in topics if t not in existing]


def preflight(module: str, inputs: Sequence[InputSpec], output: OutputSpec, bootstrap_servers: str | None,
              overwrite: bool, updates: bool = False, application_id: str | None = None) -> Any:
    """Check a ``reprocess`` request (see the module docstring); returns the loaded topology."""
    try:
        topology = load_topology(module, search_cwd=True)
    except TopologyLoadError as exc:
        raise PreflightError(str(exc)) from None
    try:
        check_inputs(topology, module, inputs, application_id)
    except ValueError as exc:
        raise PreflightError(str(exc)) from None
    kafka_inputs = [spec.location for spec in inputs if spec.kind == "kafka"]
    if (kafka_inputs or output.kind == "kafka") and not bootstrap_servers:
        raise PreflightError("kafka: inputs and outputs need --bootstrap-servers HOST:PORT")
    if kafka_inputs and bootstrap_servers:
        missing = missing_kafka_topics(bootstrap_servers, kafka_inputs)
        if missing:
            raise PreflightError(f"input topic(s) {', '.join(repr(t) for t in missing)} do not exist on "
                                 f"{bootstrap_servers}; create them or fix --input")
    if output.kind != "kafka" and not overwrite:
        targets = [os.path.join(output.location, "table")] + ([os.path.join(output.location, "updates")]
                                                              if updates else [])
        taken = [t for t in targets if os.path.exists(t)]
        if taken:
            raise PreflightError(f"output {', '.join(repr(t) for t in taken)} already exists; pass --overwrite to "
                                 f"replace it or choose another --output")
    return topology
