"""Kafka fixtures for tests (a pytest plugin, loaded by ``tests/conftest.py``).

Fixtures
--------
``kafka_bootstrap`` (session)
    ``$KAFKA_BOOTSTRAP_SERVERS`` when set (checked to answer within 120 s), otherwise a local
    Kafka 4.x broker started by ``scripts/kafka/localkafka.py`` on free ports in a temporary
    directory, stopped (and its data deleted) at the end of the session.
``topic_factory`` (function)
    ``await topic_factory(partitions=1, replication_factor=1, configs=None, prefix="t")`` creates
    a uniquely named topic on ``kafka_bootstrap``, waits until metadata shows all its partitions
    with leaders and returns its name; topics are deleted after the test.
``kafka_cluster`` (function view of a session-scoped 3-broker cluster, started on first use)
    A :class:`localkafka.KafkaHandle` with ``.bootstrap``, ``.kill(i)``, ``.stop_broker(i)``,
    ``.restart(i)``; after each test any broker the test left down is started again.
``cluster_topic_factory`` (function)
    Like ``topic_factory`` but on ``kafka_cluster`` (replication factor 3 by default).

Failure to start Kafka fails the tests that need it, except as :func:`tests.support.kafka.start_or_fail`
says. Tests using these fixtures carry the ``kafka`` (and ``cluster``) markers. The helpers the
fixtures use are in :mod:`tests.support.kafka`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import pytest

from tests.support.kafka import create_topic, delete_topics, localkafka, start_or_fail, unique_name

__all__ = ["TopicFactory", "cluster_topic_factory", "kafka_bootstrap", "kafka_cluster", "topic_factory"]


def _check_external(bootstrap: str, timeout: float = 120.0) -> None:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    deadline = time.monotonic() + timeout
    error: object = "metadata listed no brokers"
    while True:
        try:
            if localkafka.metadata_brokers(host, int(port)):
                return
        except Exception as e:  # noqa: BLE001
            error = e
        if time.monotonic() > deadline:
            pytest.fail(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap} did not answer in {timeout} s: {error}", pytrace=False)
        time.sleep(1.0)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if external:
        _check_external(external)
        yield external
        return
    handle = start_or_fail("the local Kafka broker", lambda: localkafka.start_single(timeout=180))
    try:
        yield handle.bootstrap
    finally:
        handle.stop(grace=5.0)  # the data is deleted anyway: no need to wait for a long clean shutdown


TopicFactory = Callable[..., Awaitable[str]]


def _topic_factory(bootstrap: str, default_rf: int) -> tuple[TopicFactory, list[str]]:
    created: list[str] = []

    async def factory(
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, str | int] | None = None,
        *,
        prefix: str = "t",
        name: str | None = None,
    ) -> str:
        topic = name or unique_name(prefix)
        await create_topic(bootstrap, topic, partitions, replication_factor or default_rf, configs)
        created.append(topic)
        return topic

    return factory, created


@pytest.fixture
async def topic_factory(kafka_bootstrap: str) -> AsyncIterator[TopicFactory]:
    factory, created = _topic_factory(kafka_bootstrap, 1)
    yield factory
    try:
        await delete_topics(kafka_bootstrap, created)
    except Exception as e:  # noqa: BLE001 - unique names: a leftover topic harms no other test
        print(f"warning: could not delete test topics {created}: {e}", file=sys.stderr)


@pytest.fixture(scope="session")
def _kafka_cluster_session() -> Iterator[Any]:
    handle = start_or_fail("the local 3-broker Kafka cluster", lambda: localkafka.start_cluster(3, timeout=240))
    try:
        yield handle
    finally:
        handle.stop(grace=5.0)


@pytest.fixture
def kafka_cluster(_kafka_cluster_session: Any) -> Iterator[Any]:
    handle = _kafka_cluster_session
    handle.ensure_running()
    yield handle
    handle.ensure_running()


@pytest.fixture
async def cluster_topic_factory(kafka_cluster: Any) -> AsyncIterator[TopicFactory]:
    factory, created = _topic_factory(kafka_cluster.bootstrap, 3)
    yield factory
    try:
        await delete_topics(kafka_cluster.bootstrap, created)
    except Exception as e:  # noqa: BLE001
        print(f"warning: could not delete cluster test topics {created}: {e}", file=sys.stderr)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests using the Kafka fixtures carry the ``kafka`` (and ``cluster``) markers, so
    ``-m "not kafka"`` / ``-m "not cluster"`` select reliably."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"kafka_cluster", "cluster_topic_factory", "_kafka_cluster_session"}:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.kafka)
        elif names & {"kafka_bootstrap", "topic_factory"}:
            item.add_marker(pytest.mark.kafka)
