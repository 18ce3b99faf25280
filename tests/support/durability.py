"""Helpers of the durability integration tests (``test_durability_*.py``).

* :func:`harness`: the fault harness module, :mod:`scripts.fault.harness`.
* :func:`read_all`: every record of a topic (all partitions) up to its end offsets, with a chosen
  isolation level (``read_committed`` for exactly-once outputs and changelogs).
* :func:`restored_task`: a :class:`Task` whose change-logged stores are rebuilt from what the
  changelog topics hold now (read_committed), to compare the daemon's persisted state with the
  TopologyTestDriver's stores.
* :func:`store_contents`: a store's contents as comparable Python data.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from scripts.fault import harness as _harness
from streamproc.engine.task import Task

__all__ = ["harness", "read_all", "recent_click_stream", "restored_task", "store_contents", "topic_configs"]


def harness() -> ModuleType:
    """The fault harness module, :mod:`scripts.fault.harness`."""
    return _harness


async def read_all(bootstrap: str, topic: str, *, isolation_level: str = "read_uncommitted",
                   timeout: float = 120.0) -> list[Any]:
    """Every record of ``topic`` below the end offsets read at the call (for read_committed: the
    last stable offsets), in partition order; the harness's reader, failing on a missing topic."""
    return list(await harness().read_all(bootstrap, topic, isolation_level, timeout=timeout, missing_ok=False))


async def restored_task(topology: Any, application_id: str, bootstrap: str, subtopology: int,
                        partition: int) -> Task:
    """A task of ``topology`` with every change-logged store restored from its changelog partition."""
    from streamproc.stores import ChangelogRecord

    task = Task(topology, subtopology, partition, application_id)
    for name, topic in task.changelog_topics.items():
        records = [r for r in await read_all(bootstrap, topic, isolation_level="read_committed")
                   if r.partition == partition]
        task.restore(name, [ChangelogRecord(r.key, r.value, r.timestamp) for r in records])
    return task


def store_contents(store: Any) -> Any:
    """Comparable contents: key-value/window/session ``[(key, value), ...]``; versioned
    ``{key: [(value, timestamp), ...]}`` with the observed stream time."""
    inner = getattr(store, "inner", store)
    if inner.kind == "versioned":
        return ({k: [(v.value, v.timestamp) for v in inner.versions(k)] for k in sorted(inner.keys())},
                inner.observed_stream_time)
    return [(kv.key, kv.value) for kv in inner.all()], inner.observed_stream_time


async def topic_configs(bootstrap: str, topics: list[str]) -> dict[str, dict[str, str]]:
    """``{topic: {config: value}}`` as the broker reports them (admin DescribeConfigs)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    finally:
        await admin.close()
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in response.resources:
            _code, _msg, _type, name, entries = resource[:5]
            out[name] = {e[0]: e[1] for e in entries}
    return out


def recent_click_stream(n: int, seed: int = 7, late_every: int = 500) -> list[tuple[str, dict[str, Any], int]]:
    """Like the daemon tests' click stream (1000 users, ~2 s apart with +-60 s jitter, a few clicks
    hours late) but ending about now: session and window changelogs are ``compact,delete`` with
    ``retention.ms`` = store retention + 24 h of *record* time, so the broker deletes changelog
    records with older timestamps at its next retention check, and a restore would miss them."""
    import random

    rng = random.Random(seed)
    base = int(time.time() * 1000) - n * 2_000 - 600_000
    out = []
    for i in range(n):
        user = f"user-{rng.randrange(1000):04d}"
        ts = base + i * 2_000 + rng.randint(-60_000, 60_000)
        if rng.randrange(late_every) == 0:
            ts -= 3 * 3_600_000
        out.append((user, {"page": f"/p/{rng.randrange(50)}", "i": i}, ts))
    return out
