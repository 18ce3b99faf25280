"""Which topics a topology needs, with which partition counts, and creating the missing ones.

:func:`plan_topics` is pure (unit-tested without a broker). A topic's partition count is its
existing count on the broker; a missing topic that some sub-topology writes (repartition topics,
outputs, ``through`` topics) takes the partition count of that writing sub-topology; a sub-topology's
partition count is the common count of its source topics, which must be co-partitioned: equal
counts, else :class:`~streamproc.errors.TopologyError` naming the topics and their counts; and a
repartition topic read with other topics must use their key serde (:func:`check_key_serdes`).
Changelog topics get their sub-topology's count; the dead-letter topic the largest count.
Repartition topics are created with ``retention.ms=-1`` (:data:`REPARTITION_TOPIC_CONFIG`) and
purged up to the committed offsets by the :class:`RepartitionPurger`.

:class:`TopicAdmin` reads the broker's metadata (one metadata request for all topics, so asking
never auto-creates anything) and creates what the plan marks missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete

from ..errors import TopologyError
from .service import Service

__all__ = ["REPARTITION_TOPIC_CONFIG", "RepartitionPurger", "TopicAdmin", "TopicPlan", "TopicSpec", "check_key_serdes",
           "plan_topics"]

log = logging.getLogger(__name__)


#: Configs of the repartition topics the daemon creates: records are never deleted by time (their
#: timestamps are event times, possibly far in the past, and must survive until consumed); the
#: :class:`RepartitionPurger` deletes what the group has committed instead.
REPARTITION_TOPIC_CONFIG: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1",
                                               "segment.ms": "600000"}


@dataclass(frozen=True)
class TopicSpec:
    """A topic the daemon writes: ``kind`` in output | repartition | changelog | dead-letter."""

    name: str
    partitions: int
    kind: str
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TopicPlan:
    """The resolved topics of a topology for one application id."""

    #: sub-topology id -> partition count (= number of tasks)
    subtopology_partitions: dict[int, int]
    #: source topic -> the sub-topology reading it
    source_subtopology: dict[str, int]
    #: every topic the daemon writes, by name
    outputs: dict[str, TopicSpec]
    #: sub-topology id -> {store name: changelog topic}
    changelogs: dict[int, dict[str, str]]

    @property
    def source_topics(self) -> list[str]:
        return sorted(self.source_subtopology)

    def partition_counts(self) -> dict[str, int]:
        """Every topic's partition count (sources and outputs)."""
        out = {t: self.subtopology_partitions[s] for t, s in self.source_subtopology.items()}
        out.update({t: spec.partitions for t, spec in self.outputs.items()})
        return out

    def missing(self, existing: Mapping[str, int]) -> list[TopicSpec]:
        return [spec for name, spec in sorted(self.outputs.items()) if name not in existing]


def plan_topics(subtopologies: Iterable[Any], existing: Mapping[str, int],
                changelog_configs: Mapping[str, Mapping[str, str]] | None = None,
                dead_letter_topic: str | None = None) -> TopicPlan:
    """Resolve partition counts.

    ``subtopologies``: objects with ``id``, ``source_topics``, ``sink_topics``,
    ``repartition_topics`` and ``changelog_topics`` (store -> topic), names already resolved for
    the application id. ``existing``: topic -> partition count on the broker.
    ``changelog_configs``: changelog topic -> topic configs.
    """
    subs = list(subtopologies)
    for st in subs:
        check_key_serdes(st)
    readers: dict[str, int] = {}
    writers: dict[str, list[int]] = {}
    repartition: set[str] = set()
    for st in subs:
        repartition |= set(st.repartition_topics)
        for t in st.source_topics:
            if t in readers and readers[t] != st.id:
                raise TopologyError(f"topic {t!r} is read by sub-topologies {readers[t]} and {st.id}; "
                                    f"a topic may be a source of one sub-topology only")
            readers[t] = st.id
        for t in st.sink_topics:
            writers.setdefault(t, []).append(st.id)

    counts: dict[int, int] = {}
    topic_count: dict[str, int] = {}

    def count_of(topic: str) -> int | None:
        if topic in topic_count:
            return topic_count[topic]
        if topic in existing:
            return existing[topic]
        ws = [counts[w] for w in writers.get(topic, ()) if w in counts]
        if ws and len(ws) == len(writers[topic]):
            return max(ws)
        return None

    pending = {st.id: st for st in subs}
    while pending:
        progress = False
        for sid, st in sorted(pending.items()):
            known = {t: count_of(t) for t in sorted(st.source_topics)}
            missing = [t for t, c in known.items() if c is None and not writers.get(t)]
            if missing:
                raise TopologyError(
                    f"source topic(s) {', '.join(repr(t) for t in missing)} of sub-topology {sid} do not exist; "
                    f"create them first (the daemon creates only the topics it writes)")
            if any(c is None for c in known.values()):
                continue
            distinct = set(known.values())
            if len(distinct) > 1:
                shown = ", ".join(f"{t!r} ({c} partitions)" for t, c in known.items())
                raise TopologyError(
                    f"sub-topology {sid} reads topics that must be co-partitioned but their partition counts "
                    f"differ: {shown}; repartition one side or recreate the topics with equal counts")
            counts[sid] = max((c for c in known.values() if c is not None), default=1)
            for t, c in known.items():
                topic_count[t] = c  # type: ignore[assignment]
            del pending[sid]
            progress = True
        if not progress:
            raise TopologyError(f"cannot resolve partition counts of sub-topologies {sorted(pending)}: "
                                f"their sources are only written by each other (a cycle)")

    outputs: dict[str, TopicSpec] = {}
    for topic, ws in writers.items():
        n = count_of(topic)
        want = max(counts[w] for w in ws)
        kind = "repartition" if topic in repartition else "output"
        if topic in existing:
            if kind == "repartition" and existing[topic] != want:
                raise TopologyError(
                    f"repartition topic {topic!r} has {existing[topic]} partitions but its writing sub-topology "
                    f"has {want}; delete the topic so it is recreated")
            n = existing[topic]
        configs = REPARTITION_TOPIC_CONFIG if kind == "repartition" else {}
        outputs[topic] = TopicSpec(topic, n if n is not None else want, kind, dict(configs))

    changelogs: dict[int, dict[str, str]] = {}
    cfgs = changelog_configs or {}
    for st in subs:
        changelogs[st.id] = dict(st.changelog_topics)
        for topic in st.changelog_topics.values():
            if topic in existing and existing[topic] < counts[st.id]:
                raise TopologyError(
                    f"changelog topic {topic!r} has {existing[topic]} partitions but sub-topology {st.id} has "
                    f"{counts[st.id]} tasks; it needs at least as many partitions")
            outputs[topic] = TopicSpec(topic, existing.get(topic, counts[st.id]), "changelog",
                                       dict(cfgs.get(topic, {})))
    if dead_letter_topic:
        n = existing.get(dead_letter_topic, max(counts.values(), default=1))
        outputs[dead_letter_topic] = TopicSpec(dead_letter_topic, n, "dead-letter")
    return TopicPlan(counts, readers, outputs, changelogs)


def check_key_serdes(subtopology: Any) -> None:
    """A sub-topology reading a repartition topic together with other topics (a re-keyed stream
    joined with a table) gets a key's records from both only if the key has the same *bytes* on
    both: the daemon partitions the repartition topic by its key serde's bytes (murmur2, like the
    Java clients), the other topics were partitioned by their producers' bytes, which their key
    serde declares. So the key serdes must match; else :class:`TopologyError` naming both.

    ``subtopology.key_serdes`` maps each source topic to its key serde's name (None: no serde, the
    raw bytes); sub-topologies without it are not checked.
    """
    serdes: Mapping[str, str | None] | None = getattr(subtopology, "key_serdes", None)
    repartition = set(getattr(subtopology, "repartition_topics", ()))
    if not serdes or len(serdes) < 2 or not repartition & set(serdes):
        return
    if len(set(serdes.values())) > 1:
        shown = ", ".join(f"{t!r} ({'repartition, ' if t in repartition else ''}key serde "
                          f"{name if name is not None else 'none (raw bytes)'})" for t, name in sorted(serdes.items()))
        raise TopologyError(
            f"sub-topology {subtopology.id} joins topics that must be co-partitioned by the same key bytes, but "
            f"their key serdes differ: {shown}; a key would land on different partitions of each. Give the "
            f"table the key serde its topic is written with (StreamsBuilder.table(..., key_serde=...)): the "
            f"repartition topic before a join uses the table's key serde")


class TopicAdmin:
    """Broker metadata and topic creation through ``AIOKafkaAdminClient``."""

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
            described = await admin.describe_topics()
            return {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0}
        finally:
            await admin.close()

    async def broker_count(self) -> int:
        admin = await self._admin()
        try:
            return len((await admin.describe_cluster())["brokers"])
        finally:
            await admin.close()

    async def create(self, specs: list[TopicSpec], replication_factor: int, timeout_s: float = 60.0) -> None:
        """Create ``specs``; a topic created concurrently by another instance is fine. Waits until
        the metadata shows every partition."""
        if not specs:
            return
        admin = await self._admin()
        try:
            if replication_factor < 0:
                replication_factor = max(1, min(3, len((await admin.describe_cluster())["brokers"])))
            new = [NewTopic(s.name, s.partitions, replication_factor, topic_configs=dict(s.configs)) for s in specs]
            response = await admin.create_topics(new, timeout_ms=int(timeout_s * 1000))
            for entry in response.topic_errors:
                name, code = entry[0], entry[1]
                if code not in (0, 36):  # 36 = TOPIC_ALREADY_EXISTS (another instance won the race)
                    message = entry[2] if len(entry) > 2 else ""
                    raise TopologyError(f"creating topic {name!r} failed with Kafka error code {code}: {message}")
            for s in specs:
                log.info("created %s topic %s (%d partitions, replication %d%s)", s.kind, s.name, s.partitions,
                         replication_factor, f", {dict(s.configs)}" if s.configs else "")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            want = {s.name: s.partitions for s in specs}
            while True:
                described = await admin.describe_topics(list(want))
                ready = {t["topic"] for t in described if t["error_code"] == 0
                         and len(t["partitions"]) >= want.get(t["topic"], 0)
                         and all(p["leader"] >= 0 for p in t["partitions"])}
                if ready >= set(want):
                    return
                if loop.time() > deadline:
                    raise TopologyError(f"topics {sorted(set(want) - ready)} not ready {timeout_s} s after creation")
                await asyncio.sleep(0.1)
        finally:
            await admin.close()


class RepartitionPurger(Service):
    """Deletes the records of repartition topics below the group's committed offsets.

    The committer reports every commit (:meth:`committed`); every ``interval_ms`` the purger sends
    one ``DeleteRecords`` request for the repartition partitions whose committed offset moved since
    the last purge. Errors are logged and retried at the next interval (a purge is housekeeping:
    it never fails the app). ``interval_ms=0`` disables purging.
    """

    label = "purger"

    def __init__(self, bootstrap_servers: str, client_id: str, interval_ms: int) -> None:
        super().__init__()
        self._bootstrap = bootstrap_servers
        self._client_id = client_id
        self._interval = interval_ms / 1000
        self.topics: frozenset[str] = frozenset()
        self._pending: dict[TopicPartition, int] = {}
        self.purged: dict[TopicPartition, int] = {}
        self._admin: AIOKafkaAdminClient | None = None

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not self._interval or not self.topics:
            return
        for tp, offset in offsets.items():
            if tp.topic in self.topics and offset > self.purged.get(tp, 0):
                self._pending[tp] = offset

    async def on_start(self) -> None:
        if self._interval and self.topics:
            self.add_background(self._run(), "purge-loop")

    async def on_stop(self) -> None:
        await self._cancel_background()
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.purge()

    async def purge(self) -> None:
        """Delete the records below the reported committed offsets now."""
        todo, self._pending = self._pending, {}
        if not todo:
            return
        try:
            if self._admin is None:
                self._admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id)
                await self._admin.start()
            await self._admin.delete_records({tp: RecordsToDelete(off) for tp, off in todo.items()})
        except Exception as exc:  # noqa: BLE001 - housekeeping: log, retry later
            log.warning("purging %d repartition partition(s) failed: %r; retrying in %.0f s", len(todo), exc,
                        self._interval)
            for tp, off in todo.items():
                self._pending.setdefault(tp, off)
            return
        self.purged.update(todo)
        log.debug("purged repartition topics below %s",
                  ", ".join(f"{tp.topic}[{tp.partition}]={o}" for tp, o in sorted(todo.items())))
