"""The leader's rule (task_assignment.py) and the group protocol around it (assignor.py): balance,
stickiness, standbys never on the active's process, co-partitioned inputs kept together."""

from __future__ import annotations

import json
import random
from collections import Counter
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.engine.task import TaskId
from streamproc.runtime.assignor import PROTOCOL_NAME, LocalState, TaskAssignor
from streamproc.runtime.task_assignment import MemberState, assign_tasks


def tasks(subtopologies: dict[int, int]) -> list[TaskId]:
    return [TaskId(s, p) for s, n in subtopologies.items() for p in range(n)]


def owner_of(assignment: dict[str, list[TaskId]]) -> dict[TaskId, str]:
    return {t: m for m, ts in assignment.items() for t in ts}


def check_balanced(all_tasks: list[TaskId], active: dict[str, list[TaskId]]) -> None:
    owners = owner_of(active)
    assert sorted(owners) == sorted(all_tasks), "every task assigned exactly once"
    assert sum(len(v) for v in active.values()) == len(all_tasks)
    for sid in {t.subtopology for t in all_tasks}:
        counts = [sum(1 for t in ts if t.subtopology == sid) for ts in active.values()]
        assert max(counts) - min(counts) <= 1, f"sub-topology {sid} unbalanced: {counts}"


def test_fresh_group_is_balanced_per_subtopology() -> None:
    all_tasks = tasks({0: 8, 1: 3})
    members = [MemberState(f"m{i}", f"p{i}") for i in range(3)]
    out = assign_tasks(all_tasks, [], members)
    check_balanced(all_tasks, out.active)
    totals = sorted(len(v) for v in out.active.values())
    assert totals[-1] - totals[0] <= 1, totals


def test_a_joining_member_moves_only_what_balance_needs() -> None:
    all_tasks = tasks({0: 8})
    first = assign_tasks(all_tasks, all_tasks, [MemberState("a", "pa"), MemberState("b", "pb")])
    before = owner_of(first.active)
    members = [MemberState(m, f"p{m}", previous_active=frozenset(ts), state=frozenset(ts))
               for m, ts in first.active.items()] + [MemberState("c", "pc")]
    second = assign_tasks(all_tasks, all_tasks, members)
    check_balanced(all_tasks, second.active)
    after = owner_of(second.active)
    moved = [t for t in all_tasks if before[t] != after[t]]
    # 8 tasks over 3 members: c gets 2 (or 3); nothing moves between a and b
    assert len(moved) == len(second.active["c"]) <= 3
    assert all(after[t] == "c" for t in moved)


def test_a_leaving_member_gives_its_tasks_to_those_holding_their_state() -> None:
    all_tasks = tasks({0: 6})
    members = [MemberState("a", "pa", frozenset(all_tasks[:3]), frozenset(all_tasks[:3]) | {all_tasks[3]}),
               MemberState("b", "pb", frozenset(all_tasks[3:]), frozenset(all_tasks[3:]))]
    # c left: its tasks were 3..5 in an earlier generation; now a holds a standby of task 3
    out = assign_tasks(all_tasks, all_tasks, members)
    check_balanced(all_tasks, out.active)
    assert out.active["a"] == all_tasks[:3] and out.active["b"] == all_tasks[3:]


def test_a_returning_task_goes_to_the_member_that_kept_its_state() -> None:
    all_tasks = tasks({0: 4})
    # a ran 0, 1 before; b ran 2; nobody ran 3, but b kept its state from an earlier generation
    members = [MemberState("a", "pa", frozenset(all_tasks[:2]), frozenset(all_tasks[:2])),
               MemberState("b", "pb", frozenset(all_tasks[2:3]), frozenset(all_tasks[2:]))]
    out = assign_tasks(all_tasks, all_tasks, members)
    assert owner_of(out.active)[all_tasks[3]] == "b"


def test_standbys_never_on_the_actives_process_and_prefer_kept_state() -> None:
    all_tasks = tasks({0: 6, 1: 2})
    stateful = [t for t in all_tasks if t.subtopology == 0]
    members = [MemberState("a", "pa"), MemberState("b", "pb"), MemberState("c", "pc")]
    out = assign_tasks(all_tasks, stateful, members, num_standby_replicas=2)
    owners = owner_of(out.active)
    process = {m.member_id: m.process for m in members}
    for t in stateful:
        holders = [m for m, ts in out.standby.items() if t in ts]
        assert len(holders) == 2
        assert process[owners[t]] not in {process[h] for h in holders}
    assert not any(t.subtopology == 1 for ts in out.standby.values() for t in ts), "stateless: no standby"
    assert out.missing_standbys == 0
    one = assign_tasks(all_tasks, stateful, members[:1], num_standby_replicas=1)
    assert one.missing_standbys == len(stateful) and not one.standby["a"]


def test_two_members_of_one_process_never_hold_active_and_standby_of_a_task() -> None:
    all_tasks = tasks({0: 4})
    members = [MemberState("a1", "p"), MemberState("a2", "p"), MemberState("b", "q")]
    out = assign_tasks(all_tasks, all_tasks, members, num_standby_replicas=1)
    owners = owner_of(out.active)
    for m, ts in out.standby.items():
        for t in ts:
            assert {owners[t], m} != {"a1", "a2"} and owners[t] != m


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 3), st.integers(1, 12), min_size=1, max_size=4),
       st.integers(1, 5), st.integers(0, 2), st.randoms(use_true_random=False))
def test_any_group_is_balanced_and_deterministic(subs: dict[int, int], n_members: int, replicas: int,
                                                 rng: random.Random) -> None:
    all_tasks = tasks(subs)
    members = []
    for i in range(n_members):
        prev = frozenset(t for t in all_tasks if rng.random() < 0.4)
        members.append(MemberState(f"m{i}", f"p{i}", prev, prev | frozenset(t for t in all_tasks if rng.random() < 0.2)))
    out = assign_tasks(all_tasks, all_tasks, members, replicas)
    check_balanced(all_tasks, out.active)
    assert assign_tasks(all_tasks, all_tasks, list(reversed(members)), replicas) == out
    owners = owner_of(out.active)
    copies = Counter(t for ts in out.standby.values() for t in ts)
    for t in all_tasks:
        assert copies[t] == min(replicas, n_members - 1)
        assert all(owners[t] != m for m, ts in out.standby.items() if t in ts)


class FakeCluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self._partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._partitions.get(topic)
        return None if n is None else set(range(n))


def test_protocol_round_trip_keeps_co_partitioned_inputs_together() -> None:
    source = {"orders": 0, "customers": 0, "rekeyed": 1}
    cluster = FakeCluster({"orders": 4, "customers": 4, "rekeyed": 2})
    states = {"m1": LocalState(), "m2": LocalState()}
    assignors = {m: TaskAssignor(f"proc-{m}", f"host-{m}:80{i}", source, {0}, 1, lambda m=m: states[m])
                 for i, m in enumerate(states)}
    assert all(a.name == PROTOCOL_NAME for a in assignors.values())
    metas = {m: a.metadata(["orders", "customers", "rekeyed"]) for m, a in assignors.items()}
    result = assignors["m1"].assign(cluster, metas)
    seen: dict[tuple[str, int], str] = {}
    for m, assignment in result.items():
        assignors[m].on_assignment(assignment)
        view = assignors[m].view
        by_topic = {topic: set(ps) for topic, ps in assignment.assignment}
        # task (0, p) = orders[p] and customers[p] on the same member
        assert by_topic.get("orders", set()) == by_topic.get("customers", set())
        for topic, ps in assignment.assignment:
            for p in ps:
                seen[(topic, p)] = m
        assert view.active == {TaskId(0, p) for p in by_topic.get("orders", ())} | \
            {TaskId(1, p) for p in by_topic.get("rekeyed", ())}
        assert view.partitions == {0: 4, 1: 2}
        for t in view.standby:
            assert t.subtopology == 0 and t not in view.active
    assert len(seen) == 10, "every partition assigned once"
    view = assignors["m1"].view
    for p in range(4):
        owners = view.owners_of(TaskId(0, p))
        member = seen[("orders", p)]
        assert owners.active == f"host-{member}:80{list(states).index(member)}"
        assert len(owners.standbys) == 1 and owners.standbys[0] != owners.active
    assert assignors["m2"].view.owners == view.owners, "every member gets the same group map"


def test_members_that_speak_another_version_count_as_holding_nothing() -> None:
    source = {"t": 0}
    a = TaskAssignor("pa", "", source, {0}, 0, LocalState)
    good = a.metadata(["t"])
    bad = SimpleNamespace(subscription=["t"], user_data=json.dumps({"v": 99}).encode())
    garbage = SimpleNamespace(subscription=["t"], user_data=b"\xff not json")
    result = a.assign(FakeCluster({"t": 6}), {"a": good, "b": bad, "c": garbage})
    assert sorted(p for r in result.values() for _, ps in r.assignment for p in ps) == list(range(6))
    assert all(len(r.assignment[0][1]) == 2 for r in result.values())


def test_an_assignment_we_do_not_understand_leaves_no_standbys() -> None:
    a = TaskAssignor("pa", "", {"t": 0}, {0}, 1, LocalState)
    a.on_assignment(SimpleNamespace(user_data=b"not json"))
    assert not a.view.generation_known and not a.view.standby
