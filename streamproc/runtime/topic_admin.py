"""Reading the cluster and creating topics: :class:`TopicAdmin`, over ``AIOKafkaAdminClient``.

* metadata (one request for all topics, so asking never auto-creates anything), the alive brokers
  and the cluster's ``default.replication.factor`` (:class:`Cluster`), topic configs
  (:meth:`TopicAdmin.describe` gives :class:`~streamproc.runtime.topics.TopicState`);
* :meth:`TopicAdmin.create`: the topics a :class:`~streamproc.runtime.topics.TopicPlan` marks
  missing, with exactly the replication factor asked. Their configs are first validated by the
  broker (``validate_only``), so a refused ``topic_config`` value creates nothing. While fewer
  brokers are alive than the factor needs it waits (one WARNING naming the topics, the factor and
  the brokers), up to a bound, then fails with that message; a stop request ends the wait.

Requests are retried on Kafka's retriable errors for a while (:func:`_retrying`): the admin client
sends some of them to a random broker, which may be the one that just went away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from ..errors import StreamprocError, TopicSetupError, TopologyError
from .topics import TopicSpec, TopicState

__all__ = ["Cluster", "TopicAdmin"]

log = logging.getLogger(__name__)


#: Kafka error codes of CreateTopics the admin handles.
_TOPIC_ALREADY_EXISTS = 36
_INVALID_REPLICATION_FACTOR = 38
_INVALID_CONFIG = 40
#: How often topic creation is retried while too few brokers are alive (s).
_CREATE_RETRY_S = 1.0
#: How long an admin request is retried on retriable errors (a broker just killed, a fail-over) (s).
_ADMIN_RETRY_S = 30.0

_T = TypeVar("_T")


async def _retrying(op: Callable[[], Awaitable[_T]], what: str, seconds: float = _ADMIN_RETRY_S) -> _T:
    """``await op()``, again every 0.5 s while it raises a retriable Kafka error (the admin client
    sent it to a broker that just went away, a controller fail-over), for up to ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        try:
            return await op()
        except KafkaError as exc:
            if not getattr(exc, "retriable", False) or loop.time() >= deadline:
                raise
            log.debug("%s: %r; retrying", what, exc)
        await asyncio.sleep(0.5)


@dataclass(frozen=True)
class Cluster:
    """The brokers the cluster lists as alive (``(node id, "host:port")``) and its
    ``default.replication.factor`` (None when it could not be read)."""

    brokers: tuple[tuple[int, str], ...]
    default_replication_factor: int | None

    def describe_brokers(self) -> str:
        """``2 broker(s) alive: 1 (127.0.0.1:9092), 3 (127.0.0.1:9094)``."""
        return f"{len(self.brokers)} broker(s) alive: " + ", ".join(f"{i} ({addr})" for i, addr in self.brokers)


class TopicAdmin:
    """Broker metadata, topic configs and topic creation through ``AIOKafkaAdminClient``."""

    def __init__(self, bootstrap_servers: str, client_id: str) -> None:
        self._bootstrap = bootstrap_servers
        self._client_id = client_id

    async def _admin(self) -> AIOKafkaAdminClient:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id,
                                    request_timeout_ms=30_000)
        await admin.start()
        return admin

    async def partition_counts(self) -> dict[str, int]:
        """Every existing topic -> its partition count (describing all topics creates none)."""
        admin = await self._admin()
        try:
            described = await _retrying(admin.describe_topics, "describing topics")
            return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}
        finally:
            await admin.close()

    async def cluster(self, with_default: bool = True) -> Cluster:
        """The alive brokers and (``with_default``) the cluster's ``default.replication.factor``,
        read from one broker (None when it cannot be read, e.g. DescribeConfigs not allowed)."""
        admin = await self._admin()
        try:
            return await _cluster(admin, with_default)
        finally:
            await admin.close()

    async def describe(self, topics: Iterable[str]) -> dict[str, TopicState]:
        """``topics`` that exist -> their partitions, replication factor and configs."""
        names = sorted(set(topics))
        if not names:
            return {}
        admin = await self._admin()
        try:
            described = await _retrying(lambda: admin.describe_topics(names), "describing topics")
            meta = {t["topic"]: t for t in described if t["error_code"] == 0}
            configs = await _retrying(lambda: _topic_configs(admin, sorted(meta)), "describing topic configs")
        finally:
            await admin.close()
        return {name: TopicState(len(t["partitions"]), min((len(p["replicas"]) for p in t["partitions"]), default=0),
                                 configs.get(name, {}))
                for name, t in meta.items()}

    async def create(self, specs: list[TopicSpec], replication_factor: int, *, wait_s: float = 300.0,
                     how: str = "", stop: asyncio.Event | None = None, timeout_s: float = 60.0) -> bool:
        """Create ``specs`` with exactly ``replication_factor`` replicas (positive); a topic created
        concurrently by another instance is fine. Waits until the metadata shows every partition.

        While fewer brokers are alive than the factor needs, nothing is created with fewer
        replicas: one WARNING names the topics, the factor (``how``: where it came from) and the
        brokers seen, and creation is retried every second for up to ``wait_s``; then a
        :class:`StreamprocError` with that message. Returns False when ``stop`` was set while waiting
        (nothing more is created), else True. A topic config the broker refuses raises
        :class:`TopicSetupError` naming it.
        """
        if not specs:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        factor = f"replication factor {replication_factor}{f' ({how})' if how else ''}"
        todo = list(specs)
        waited = False
        admin = await self._admin()
        try:
            await _retrying(lambda: self._validate(admin, specs, replication_factor, timeout_s), "validating topics")
            while True:
                cluster = await _retrying(lambda: _cluster(admin, with_default=False), "describing the cluster")
                if len(cluster.brokers) >= replication_factor:
                    try:
                        todo = await self._create_once(admin, todo, replication_factor, timeout_s)
                    except KafkaError as exc:  # a broker or the controller went away: the next round retries
                        if not getattr(exc, "retriable", False):
                            raise
                        log.debug("creating topics: %r; retrying", exc)
                    if not todo:
                        break
                names = ", ".join(repr(s.name) for s in todo)
                if not waited:
                    waited = True
                    log.warning("cannot create topic(s) %s with %s: the cluster has %s; waiting up to %.0f s "
                                "(topic_creation_timeout_ms) for more brokers (a topic is never created with fewer "
                                "replicas than asked)", names, factor, cluster.describe_brokers(), wait_s)
                if loop.time() >= deadline:
                    raise StreamprocError(
                        f"gave up creating topic(s) {names} with {factor} after {wait_s:.0f} s "
                        f"(topic_creation_timeout_ms): the cluster has {cluster.describe_brokers()}; start the "
                        f"missing brokers, or set replication_factor to what the cluster can hold")
                if await _stopped(stop, min(_CREATE_RETRY_S, max(0.0, deadline - loop.time()))):
                    log.info("stop requested while waiting for brokers: no more topics are created")
                    return False
            if waited:
                log.info("%d broker(s) alive now: topics created after waiting %.0f s", len(cluster.brokers),
                         wait_s - max(0.0, deadline - loop.time()))
            await self._wait_ready(admin, specs, timeout_s)
            return True
        finally:
            await admin.close()

    @staticmethod
    async def _validate(admin: AIOKafkaAdminClient, specs: list[TopicSpec], replication_factor: int,
                        timeout_s: float) -> None:
        """CreateTopics with ``validate_only``: a config the broker refuses (a bad ``topic_config``
        value) raises :class:`TopicSetupError` before any topic is created."""
        new = [NewTopic(s.name, s.partitions, replication_factor, topic_configs=dict(s.configs)) for s in specs]
        response = await admin.create_topics(new, timeout_ms=int(timeout_s * 1000), validate_only=True)
        by_name = {s.name: s for s in specs}
        for entry in response.topic_errors:
            if entry[1] == _INVALID_CONFIG:
                _refused_config(by_name[entry[0]], entry[2] if len(entry) > 2 else "")

    async def _create_once(self, admin: AIOKafkaAdminClient, specs: list[TopicSpec], replication_factor: int,
                           timeout_s: float) -> list[TopicSpec]:
        """One CreateTopics request; returns the specs the broker refused for too few brokers."""
        new = [NewTopic(s.name, s.partitions, replication_factor, topic_configs=dict(s.configs)) for s in specs]
        response = await admin.create_topics(new, timeout_ms=int(timeout_s * 1000))
        by_name = {s.name: s for s in specs}
        retry: list[TopicSpec] = []
        for entry in response.topic_errors:
            name, code = entry[0], entry[1]
            message = entry[2] if len(entry) > 2 else ""
            spec = by_name[name]
            if code == _INVALID_REPLICATION_FACTOR:
                retry.append(spec)
            elif code == _INVALID_CONFIG:
                _refused_config(spec, message)
            elif code not in (0, _TOPIC_ALREADY_EXISTS):  # already exists: another instance won the race
                raise TopologyError(f"creating topic {name!r} failed with Kafka error code {code}: {message}")
            else:
                log.info("created %s topic %s (%d partitions, replication %d%s)", spec.kind, name, spec.partitions,
                         replication_factor, f", {dict(spec.configs)}" if spec.configs else "")
        return retry

    @staticmethod
    async def _wait_ready(admin: AIOKafkaAdminClient, specs: list[TopicSpec], timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        want = {s.name: s.partitions for s in specs}
        while True:
            described = await _retrying(lambda: admin.describe_topics(list(want)), "describing topics")
            ready = {t["topic"] for t in described if t["error_code"] == 0
                     and len(t["partitions"]) >= want.get(t["topic"], 0)
                     and all(p["leader"] >= 0 for p in t["partitions"])}
            if ready >= set(want):
                return
            if loop.time() > deadline:
                raise TopologyError(f"topics {sorted(set(want) - ready)} not ready {timeout_s} s after creation")
            await asyncio.sleep(0.1)


def _refused_config(spec: TopicSpec, message: str) -> None:
    raise TopicSetupError(f"the broker refused the configs of {spec.kind} topic {spec.name!r} "
                          f"({', '.join(f'{k}={v}' for k, v in spec.configs.items())}): {message}; check topic_config")


async def _stopped(stop: asyncio.Event | None, seconds: float) -> bool:
    """Sleep ``seconds``; True at once when ``stop`` is (or becomes) set."""
    if stop is None:
        await asyncio.sleep(seconds)
        return False
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _cluster(admin: AIOKafkaAdminClient, with_default: bool = True) -> Cluster:
    brokers = (await _retrying(admin.describe_cluster, "describing the cluster"))["brokers"]
    alive = tuple(sorted((int(b["node_id"]), f"{b['host']}:{b['port']}") for b in brokers))
    default: int | None = None
    if with_default and alive:
        try:
            found = await _retrying(lambda: _configs(admin, ConfigResourceType.BROKER, [str(alive[0][0])],
                                                     ["default.replication.factor"]), "reading broker configs")
            default = int(found[str(alive[0][0])]["default.replication.factor"])
        except Exception as exc:  # noqa: BLE001 - reported by the caller, which needs the value
            log.debug("reading default.replication.factor failed: %r", exc)
    return Cluster(alive, default)


async def _topic_configs(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, dict[str, str]]:
    return await _configs(admin, ConfigResourceType.TOPIC, topics, None) if topics else {}


async def _configs(admin: AIOKafkaAdminClient, kind: ConfigResourceType, names: list[str],
                   keys: list[str] | None) -> dict[str, dict[str, str]]:
    """DescribeConfigs: resource name -> {config: value} (``keys`` None: all of them)."""
    wanted = None if keys is None else dict.fromkeys(keys)
    responses = await admin.describe_configs([ConfigResource(kind, n, wanted) for n in names])
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for res in response.to_object()["resources"]:
            if res["error_code"] != 0:
                raise StreamprocError(f"describing the configs of {res['resource_name']!r} failed with Kafka error "
                                      f"code {res['error_code']}: {res['error_message']}")
            out[res["resource_name"]] = {
                (e.get("config_names") or e.get("config_name")): e["config_value"] for e in res["config_entries"]}
    return out
