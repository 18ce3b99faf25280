"""Which instance runs which task, actively or as a standby: the rule the group's leader applies.

A *task* is one partition number of one sub-topology (:class:`~streamproc.engine.task.TaskId`); its
input is that partition of every source topic of the sub-topology, so co-partitioned inputs always
go together. :func:`assign_tasks` is pure (no Kafka): the assignor (``assignor.py``) calls it with
what each member said when it joined.

The rule, in order:

1. **Balance per sub-topology.** Each member gets ``floor(n / m)`` or ``floor(n / m) + 1`` of the
   ``n`` tasks of every sub-topology (``m`` members), so a sub-topology's work is spread evenly.
   Where there is a choice, the extra task goes to the member with the fewest tasks so far.
2. **Stickiness.** A task stays with the member that ran it in the previous generation when that
   member still has room under rule 1; otherwise it goes preferably to a member that holds state
   for it (a standby or a task kept since an earlier rebalance), so the new owner restores only a
   tail; otherwise to the member with the fewest tasks of that sub-topology.
3. **Standbys.** Each stateful task gets ``num_standby_replicas`` standbys on other *processes*
   than its active one (never two copies on one process); a process that already holds state for
   the task is preferred, then the one with the fewest tasks (active and standby). With fewer
   processes than ``1 + num_standby_replicas``, the task gets as many standbys as there are other
   processes (:attr:`Assignment.missing_standbys` counts what could not be placed).

Ties are broken by member id, so every leader computes the same assignment from the same input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..engine.task import TaskId

__all__ = ["Assignment", "MemberState", "assign_tasks"]


@dataclass(frozen=True)
class MemberState:
    """What one member told the leader when it joined."""

    member_id: str
    #: the instance: one process may hold several members in principle; standbys avoid its actives
    process: str
    #: ``host:port`` queries are redirected to (empty: queries off there)
    server: str = ""
    #: tasks this member ran actively in the previous generation
    previous_active: frozenset[TaskId] = frozenset()
    #: tasks this member holds state for now (kept after a rebalance, or standbys)
    state: frozenset[TaskId] = frozenset()


@dataclass
class Assignment:
    """Per member: active tasks and standby tasks, each sorted."""

    active: dict[str, list[TaskId]] = field(default_factory=dict)
    standby: dict[str, list[TaskId]] = field(default_factory=dict)
    #: standby copies that could not be placed (too few processes)
    missing_standbys: int = 0


def assign_tasks(tasks: Iterable[TaskId], stateful: Iterable[TaskId], members: Iterable[MemberState],
                 num_standby_replicas: int = 0) -> Assignment:
    """Assign ``tasks`` to ``members`` (see the module docstring); ``stateful`` tasks get standbys."""
    order = sorted(members, key=lambda m: m.member_id)
    out = Assignment(active={m.member_id: [] for m in order}, standby={m.member_id: [] for m in order})
    if not order:
        return out
    by_subtopology: dict[int, list[TaskId]] = {}
    for t in sorted(set(tasks)):
        by_subtopology.setdefault(t.subtopology, []).append(t)
    total = {m.member_id: 0 for m in order}
    for sid in sorted(by_subtopology):
        _assign_subtopology(by_subtopology[sid], order, out.active, total)
    for tasks_of in out.active.values():
        tasks_of.sort()
    if num_standby_replicas > 0:
        out.missing_standbys = _assign_standbys(sorted(set(stateful) & set(_all(out.active))), order, out,
                                                num_standby_replicas)
    return out


def _all(assigned: Mapping[str, list[TaskId]]) -> Iterable[TaskId]:
    for tasks in assigned.values():
        yield from tasks


def _assign_subtopology(tasks: list[TaskId], order: list[MemberState], active: dict[str, list[TaskId]],
                        total: dict[str, int]) -> None:
    """Rules 1 and 2 for the tasks of one sub-topology."""
    m = len(order)
    floor, extra = divmod(len(tasks), m)
    count = {mem.member_id: 0 for mem in order}

    def room(member: str) -> bool:
        return count[member] < floor or (count[member] == floor and extra_left[0] > 0)

    def take(member: str, task: TaskId) -> None:
        if count[member] == floor:
            extra_left[0] -= 1
        count[member] += 1
        total[member] += 1
        active[member].append(task)

    extra_left = [extra]
    previous = {t: mem.member_id for mem in order for t in mem.previous_active}
    holders: dict[TaskId, list[str]] = {}
    for mem in order:
        for t in mem.state:
            holders.setdefault(t, []).append(mem.member_id)
    left: list[TaskId] = []
    # rule 2a: the previous owner, while it stays within its share (floor first, so that the extra
    # tasks are not all taken by whoever had many before)
    for t in tasks:
        owner = previous.get(t)
        if owner is not None and owner in count and count[owner] < floor:
            take(owner, t)
        else:
            left.append(t)
    rest: list[TaskId] = []
    for t in left:
        owner = previous.get(t)
        if owner is not None and owner in count and room(owner):
            take(owner, t)
        else:
            rest.append(t)
    # rule 2b: a member that holds state for the task; then the least loaded
    for t in rest:
        candidates = [h for h in holders.get(t, ()) if h in count and room(h)]
        if not candidates:
            candidates = [mem.member_id for mem in order if room(mem.member_id)]
        best = min(candidates, key=lambda h: (count[h], total[h], h))
        take(best, t)


def _assign_standbys(stateful: list[TaskId], order: list[MemberState], out: Assignment, replicas: int) -> int:
    """Rule 3; returns how many standby copies could not be placed."""
    process = {mem.member_id: mem.process for mem in order}
    owner = {t: member for member, tasks in out.active.items() for t in tasks}
    load = {member: len(tasks) for member, tasks in out.active.items()}
    holds = {mem.member_id: mem.state for mem in order}
    missing = 0
    for t in stateful:
        used = {process[owner[t]]}
        for _ in range(replicas):
            candidates = [mem.member_id for mem in order if mem.process not in used]
            if not candidates:
                missing += 1
                continue
            best = min(candidates, key=lambda c: (t not in holds[c], load[c], c))
            out.standby[best].append(t)
            load[best] += 1
            used.add(process[best])
    for tasks in out.standby.values():
        tasks.sort()
    return missing
