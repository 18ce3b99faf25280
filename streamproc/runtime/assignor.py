"""The group protocol of streamproc: a partition assignor of our own for aiokafka's consumer.

Every member joins with ``streamproc`` as its only assignment strategy; its subscription carries
(JSON in ``user_data``) its process id, the ``host:port`` queries are redirected to
(``application_server``), the tasks it ran in the previous generation and the tasks it holds state
for. The leader turns the members' subscriptions into tasks (:mod:`.task_assignment`: balanced
per sub-topology, sticky, with standbys) and each task into its input partitions: task ``(s, p)``
is partition ``p`` of every source topic of sub-topology ``s``, so co-partitioned inputs are
never split. Every member's assignment carries, besides its partitions, its standby tasks and the
whole group's map (task -> active and standby servers), which answers "who owns this key" for
interactive queries (:class:`GroupView`).

A static member (``group_instance_id``) restarted within the session timeout gets its previous
assignment back from the coordinator without a rebalance; the assignment bytes, and so its standby
tasks and the group map, come back with it.

It is the only strategy offered: a group cannot mix members of this protocol with members of a
version from before it (Kafka's ``range``); the coordinator refuses the newcomer, and the daemon
stops with an error saying so (see docs/production.md). (Offering ``range`` second is not an
option with aiokafka 0.14: it sends one JoinGroup per strategy, the second with other metadata,
which makes the coordinator start a new rebalance every time two members join together.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from ..engine.task import TaskId
from .task_assignment import MemberState, assign_tasks

__all__ = ["PROTOCOL_NAME", "GroupView", "LocalState", "TaskAssignor", "TaskOwners"]

log = logging.getLogger(__name__)

#: The assignment strategy's name in the group protocol (every member must use it).
PROTOCOL_NAME = "streamproc"
#: Version of the JSON carried in ``user_data``; a member sending another version counts as one
#: holding no state.
USER_DATA_VERSION = 1


@dataclass(frozen=True)
class LocalState:
    """What this member tells the leader when it joins."""

    previous_active: frozenset[TaskId] = frozenset()
    state: frozenset[TaskId] = frozenset()


@dataclass(frozen=True)
class TaskOwners:
    """Who runs a task: the active owner's ``host:port`` (None: unassigned or queries off there) and
    the standbys'."""

    active: str | None
    standbys: tuple[str, ...] = ()


@dataclass
class GroupView:
    """What this member learnt from its last assignment."""

    #: an assignment of ours was received (False before the first one, or when it was not understood)
    generation_known: bool = False
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    #: per task: the servers of its active and standby owners
    owners: dict[TaskId, TaskOwners] = field(default_factory=dict)
    #: number of tasks (partitions) per sub-topology
    partitions: dict[int, int] = field(default_factory=dict)

    def owners_of(self, task: TaskId) -> TaskOwners:
        return self.owners.get(task, TaskOwners(None))


def _task_text(t: TaskId) -> str:
    return f"{t.subtopology}_{t.partition}"


def _parse_task(text: str) -> TaskId:
    sid, _, p = text.partition("_")
    return TaskId(int(sid), int(p))


class TaskAssignor(AbstractPartitionAssignor):
    """The aiokafka side of the protocol (see the module docstring).

    ``source_subtopology``: source topic -> sub-topology id (from the topic plan); ``stateful``:
    the sub-topologies with change-logged stores (they get standbys); ``local_state``: called at
    each join for this member's :class:`LocalState`.
    """

    name = PROTOCOL_NAME
    version = 0

    def __init__(self, process: str, server: str, source_subtopology: Mapping[str, int],
                 stateful: Iterable[int], num_standby_replicas: int,
                 local_state: Callable[[], LocalState]) -> None:
        self.process = process
        self.server = server
        self.source_subtopology = dict(source_subtopology)
        self.stateful = frozenset(stateful)
        self.num_standby_replicas = num_standby_replicas
        self.local_state = local_state
        self.view = GroupView()

    # ---- every member ------------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:  # type: ignore[override]
        local = self.local_state()
        data = {"v": USER_DATA_VERSION, "process": self.process, "server": self.server,
                "active": sorted(_task_text(t) for t in local.previous_active),
                "state": sorted(_task_text(t) for t in local.state)}
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), json.dumps(data).encode())

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:  # type: ignore[override]
        try:
            data = json.loads(assignment.user_data or b"{}")
            servers = data.get("servers", [])
            owners: dict[TaskId, TaskOwners] = {}
            for text, where in data.get("owners", {}).items():
                active = servers[where[0]] if where[0] >= 0 else ""
                owners[_parse_task(text)] = TaskOwners(active or None, tuple(servers[i] for i in where[1:]))
            self.view = GroupView(True, frozenset(_parse_task(t) for t in data.get("active", [])),
                                  frozenset(_parse_task(t) for t in data.get("standby", [])), owners,
                                  {int(k): int(v) for k, v in data.get("partitions", {}).items()})
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            log.warning("assignment metadata not understood (%r): no standby tasks, query routing unknown "
                        "until the next rebalance", exc)
            self.view = GroupView()

    # ---- the leader ----------------------------------------------------------------------------------

    def assign(self, cluster: Any,  # type: ignore[override]
               members: Mapping[str, ConsumerProtocolMemberMetadata]) -> dict[str, ConsumerProtocolMemberAssignment]:
        states = [self._member_state(member_id, meta) for member_id, meta in members.items()]
        subscribed = {t for meta in members.values() for t in meta.subscription}
        partitions: dict[int, int] = {}
        topics_of: dict[int, list[str]] = {}
        for topic in sorted(subscribed):
            sid = self.source_subtopology.get(topic)
            found = cluster.partitions_for_topic(topic)
            if sid is None or not found:
                if sid is not None:
                    log.warning("no partition metadata for source topic %s: its tasks are not assigned", topic)
                continue
            topics_of.setdefault(sid, []).append(topic)
            partitions[sid] = max(partitions.get(sid, 0), len(found))
        tasks = [TaskId(sid, p) for sid, n in partitions.items() for p in range(n)]
        stateful = [t for t in tasks if t.subtopology in self.stateful]
        result = assign_tasks(tasks, stateful, states, self.num_standby_replicas)
        if result.missing_standbys:
            log.warning("num_standby_replicas=%d: %d standby copies not placed (only %d instance(s) in the group)",
                        self.num_standby_replicas, result.missing_standbys,
                        len({s.process for s in states}))
        servers: list[str] = []
        index: dict[str, int] = {}

        def server_index(member_id: str) -> int:
            server = by_member[member_id].server
            if server not in index:
                index[server] = len(servers)
                servers.append(server)
            return index[server]

        by_member = {s.member_id: s for s in states}
        owners: dict[str, list[int]] = {}
        for member_id, active in result.active.items():
            for t in active:
                owners[_task_text(t)] = [server_index(member_id)]
        for member_id, standby in result.standby.items():
            for t in standby:
                owners[_task_text(t)].append(server_index(member_id))
        shared = {"servers": servers, "owners": owners, "partitions": {str(k): v for k, v in partitions.items()}}
        out: dict[str, ConsumerProtocolMemberAssignment] = {}
        for member_id in members:
            active = result.active.get(member_id, [])
            by_topic: dict[str, list[int]] = {}
            for t in active:
                for topic in topics_of.get(t.subtopology, ()):
                    by_topic.setdefault(topic, []).append(t.partition)
            data = {"v": USER_DATA_VERSION, "active": [_task_text(t) for t in active],
                    "standby": [_task_text(t) for t in result.standby.get(member_id, [])], **shared}
            out[member_id] = ConsumerProtocolMemberAssignment(
                self.version, sorted((topic, sorted(ps)) for topic, ps in by_topic.items()),
                json.dumps(data).encode())
        log.info("assigned %d task(s) to %d member(s)%s", len(tasks), len(states),
                 f", {sum(len(v) for v in result.standby.values())} standby task(s)"
                 if self.num_standby_replicas else "")
        return out

    @staticmethod
    def _member_state(member_id: str, meta: ConsumerProtocolMemberMetadata) -> MemberState:
        try:
            data = json.loads(meta.user_data or b"{}")
            if data.get("v") != USER_DATA_VERSION:
                raise ValueError(f"user data version {data.get('v')!r}")
            return MemberState(member_id, str(data["process"]), str(data.get("server", "")),
                               frozenset(_parse_task(t) for t in data.get("active", [])),
                               frozenset(_parse_task(t) for t in data.get("state", [])))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("member %s joined with subscription data we do not understand (%r): it is treated as "
                        "holding no state", member_id, exc)
            return MemberState(member_id, member_id)

