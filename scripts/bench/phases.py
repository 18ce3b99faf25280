"""Shared parts of the daemon benchmarks that run each phase in a child process
(``bench_join_backlog.py``, ``bench_wordcount.py``): the local broker, topic creation, and a phase
measured in its own process (CPU seconds and peak RSS per phase)."""

from __future__ import annotations

import asyncio
import importlib.util
import multiprocessing as mp
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def localkafka() -> Any:
    """``scripts/kafka/localkafka.py`` as a module (start a broker with ``.start_single()``)."""
    spec = importlib.util.spec_from_file_location("localkafka", REPO / "scripts" / "kafka" / "localkafka.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["localkafka"] = module
    spec.loader.exec_module(module)
    return module


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """Create ``names`` with ``partitions`` partitions each and wait until they are all described."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
        for _ in range(100):
            described = await admin.describe_topics(names)
            if all(d["error_code"] == 0 and len(d["partitions"]) == partitions for d in described):
                return
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def measured(phase: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``phase()``'s result plus the CPU seconds it took and this process's peak RSS (MB)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = phase()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {**result, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "rss_mb": after.ru_maxrss / 1024}


def run_in_child(child: Callable[..., None], phase: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """Run ``child(phase, args, queue)`` in a spawned process and return what it puts on the queue."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(phase, args, q))
    p.start()
    result = q.get(timeout=3600)
    p.join()
    return dict(result)
