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

Topic configs (:func:`apply_topic_config`): every topic the daemon creates gets the user's
``topic_config`` on top of the daemon's defaults, under the configs the daemon *requires*
(:attr:`TopicSpec.required`: a changelog's ``cleanup.policy`` and retention, a repartition topic's
``cleanup.policy`` and ``retention.ms``); a ``topic_config`` value that would change one of them is a
:class:`~streamproc.errors.TopicSetupError`.

Existing topics (:func:`check_existing_topics`) are checked before anything is processed: a
changelog whose ``cleanup.policy`` is not what its store needs, a changelog with fewer partitions
than its sub-topology's tasks, a repartition topic whose count differs from its writer's: errors (one
line each); a replication factor below the asked one: a warning.

:class:`~streamproc.runtime.topic_admin.TopicAdmin` (``topic_admin.py``) reads the cluster and
creates what the plan marks missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from ..errors import TopicSetupError, TopologyError
from .service import Service

__all__ = ["REPARTITION_TOPIC_CONFIG", "REPARTITION_TOPIC_REQUIRED", "RepartitionPurger", "TopicPlan", "TopicSpec",
           "TopicState", "apply_topic_config", "check_existing_topics", "check_key_serdes", "plan_topics"]

log = logging.getLogger(__name__)


#: Configs of the repartition topics the daemon creates: records are never deleted by time (their
#: timestamps are event times, possibly far in the past, and must survive until consumed); the
#: :class:`RepartitionPurger` deletes what the group has committed instead.
REPARTITION_TOPIC_CONFIG: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1",
                                               "segment.ms": "600000"}
#: The part of :data:`REPARTITION_TOPIC_CONFIG` a user ``topic_config`` may not change.
REPARTITION_TOPIC_REQUIRED: Mapping[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1"}


@dataclass(frozen=True)
class TopicSpec:
    """A topic the daemon writes: ``kind`` in output | repartition | changelog | dead-letter.

    ``configs``: the configs it is created with; ``required``: those of them the daemon needs
    (a user ``topic_config`` may not change them); ``owner``: for a changelog, its store
    (``key-value store 'counts'``), named in messages.
    """

    name: str
    partitions: int
    kind: str
    configs: Mapping[str, str] = field(default_factory=dict)
    required: Mapping[str, str] = field(default_factory=dict)
    owner: str = ""


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
    #: internal topic (changelog, repartition) -> the task count it must serve (its sub-topology's;
    #: a repartition topic's writer's)
    internal_tasks: dict[str, int] = field(default_factory=dict)

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
                dead_letter_topic: str | None = None,
                changelog_stores: Mapping[str, str] | None = None) -> TopicPlan:
    """Resolve partition counts.

    ``subtopologies``: objects with ``id``, ``source_topics``, ``sink_topics``,
    ``repartition_topics`` and ``changelog_topics`` (store -> topic), names already resolved for
    the application id. ``existing``: topic -> partition count on the broker.
    ``changelog_configs``: changelog topic -> the topic configs its store needs (all required).
    ``changelog_stores``: changelog topic -> its store, as messages name it.

    Raises :class:`TopicSetupError` for sources that do not exist (the CLI exits 2) and
    :class:`TopologyError` for sources that are not co-partitioned. Existing
    internal topics with wrong partition counts are not raised here: :func:`check_existing_topics`
    reports them with the other problems of existing topics.
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
                raise TopicSetupError(
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
    internal_tasks: dict[str, int] = {}
    for topic, ws in writers.items():
        n = count_of(topic)
        want = max(counts[w] for w in ws)
        if topic in repartition:
            internal_tasks[topic] = want
            outputs[topic] = TopicSpec(topic, existing.get(topic, want), "repartition",
                                       dict(REPARTITION_TOPIC_CONFIG), dict(REPARTITION_TOPIC_REQUIRED))
        else:
            outputs[topic] = TopicSpec(topic, existing.get(topic, n if n is not None else want), "output")

    changelogs: dict[int, dict[str, str]] = {}
    cfgs = changelog_configs or {}
    owners = changelog_stores or {}
    for st in subs:
        changelogs[st.id] = dict(st.changelog_topics)
        for store, topic in st.changelog_topics.items():
            internal_tasks[topic] = counts[st.id]
            needs = dict(cfgs.get(topic, {}))
            outputs[topic] = TopicSpec(topic, existing.get(topic, counts[st.id]), "changelog", needs, dict(needs),
                                       owners.get(topic, f"store {store!r}"))
    if dead_letter_topic:
        n = existing.get(dead_letter_topic, max(counts.values(), default=1))
        outputs[dead_letter_topic] = TopicSpec(dead_letter_topic, n, "dead-letter")
    return TopicPlan(counts, readers, outputs, changelogs, internal_tasks)


def apply_topic_config(plan: TopicPlan, topic_config: Mapping[str, str]) -> None:
    """Give every topic of ``plan`` the user's ``topic_config`` (in place): daemon defaults, then
    the user's configs, then the daemon's required configs.

    A ``topic_config`` value that differs from a config some topic requires raises
    :class:`TopicSetupError` with one line per such topic, naming the key, both values and why. The
    check covers every topic of the plan, existing or not, so a setting is refused or accepted the
    same way on every start.
    """
    if not topic_config:
        return
    problems: list[str] = []
    for name, spec in sorted(plan.outputs.items()):
        for key, needed in sorted(spec.required.items()):
            given = topic_config.get(key)
            if given is not None and not _same_config(key, given, needed):
                what = f"its {spec.owner} needs" if spec.owner else "the daemon needs"
                problems.append(
                    f"topic_config {key}={given} cannot apply to {spec.kind} topic {name!r}: {what} {key}={needed} "
                    f"(the daemon sets it on the topics it creates); remove {key} from topic_config")
        if not problems:
            plan.outputs[name] = _with_configs(spec, {**spec.configs, **topic_config, **spec.required})
    if problems:
        raise TopicSetupError("\n".join(problems))


def _with_configs(spec: TopicSpec, configs: Mapping[str, str]) -> TopicSpec:
    return TopicSpec(spec.name, spec.partitions, spec.kind, dict(configs), spec.required, spec.owner)


def _same_config(key: str, a: str, b: str) -> bool:
    if key == "cleanup.policy":  # a list: "compact,delete" == "delete, compact"
        return _policy(a) == _policy(b)
    return a.strip() == b.strip()


def _policy(value: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in value.strip().strip("[]").split(",") if p.strip())


def _policy_cost(actual: str, needed: str) -> str:
    """Why a changelog's cleanup policy matters, for the error line."""
    have, want = _policy(actual), _policy(needed)
    if "compact" in want and "compact" not in have:
        return "without compaction the broker deletes state by time or size and a restore misses it"
    if "delete" in have and "delete" not in want:
        return "with delete the broker deletes live state by time and a restore misses it"
    return "without delete the changelog keeps expired windows forever and restores keep growing"


@dataclass(frozen=True)
class TopicState:
    """An existing topic as the cluster describes it: partition count, replication factor (the
    smallest replica count of its partitions) and topic configs (empty when not described)."""

    partitions: int
    replication: int
    configs: Mapping[str, str] = field(default_factory=dict)


def check_existing_topics(plan: TopicPlan, states: Mapping[str, TopicState],
                          replication_factor: int | None, replication_origin: str = "") -> tuple[list[str], list[str]]:
    """Check the topics of ``plan`` that exist (``states``) against what the daemon needs.

    Returns ``(errors, warnings)``, one line each. Errors: a changelog whose ``cleanup.policy``
    differs from its store's; a changelog with fewer partitions than its sub-topology's tasks; a
    repartition topic whose partition count is not its writing sub-topology's task count. Warnings:
    a topic whose replication factor is below ``replication_factor`` (the asked factor; None: not
    checked), since it may have been chosen; ``replication_origin`` says where the factor came from.
    """
    errors: list[str] = []
    warnings: list[str] = []
    for name, spec in sorted(plan.outputs.items()):
        state = states.get(name)
        if state is None:
            continue
        tasks = plan.internal_tasks.get(name)
        if spec.kind == "changelog":
            needed = spec.required.get("cleanup.policy")
            actual = state.configs.get("cleanup.policy")
            if needed is not None and actual is not None and not _same_config("cleanup.policy", actual, needed):
                errors.append(
                    f"changelog topic {name!r} has cleanup.policy={actual} but its {spec.owner} needs "
                    f"cleanup.policy={needed} ({_policy_cost(actual, needed)}); "
                    f"change it (kafka-configs.sh --alter --entity-type topics --entity-name {name} --add-config "
                    f"cleanup.policy=[{needed}]) or delete the topic so the daemon creates it (its state is lost)")
            if tasks is not None and state.partitions < tasks:
                errors.append(
                    f"changelog topic {name!r} has {state.partitions} partition(s) but its {spec.owner} has {tasks} "
                    f"tasks, one changelog partition each; add partitions (kafka-topics.sh --alter --topic {name} "
                    f"--partitions {tasks}) or delete the topic so the daemon creates it")
        elif spec.kind == "repartition" and tasks is not None and state.partitions != tasks:
            errors.append(
                f"repartition topic {name!r} has {state.partitions} partition(s) but its writing sub-topology has "
                f"{tasks} tasks and needs exactly {tasks}; delete the topic (once the group has consumed it) so the "
                f"daemon creates it")
        if replication_factor is not None and state.replication < replication_factor:
            warnings.append(
                f"{spec.kind} topic {name!r} has replication factor {state.replication}, below the "
                f"{replication_factor} asked{f' ({replication_origin})' if replication_origin else ''}; the daemon "
                f"does not change existing topics: add replicas with kafka-reassign-partitions.sh if it was not "
                f"chosen")
    return errors, warnings


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
