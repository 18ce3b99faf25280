"""``topologies.sessions`` with the benchmark's topic names, gap and grace, for ``streamproc run``.

The harness runs ``streamproc run benchmarks.peers.streamproc_sessions ...`` with ``PYTHONPATH`` the repository root
and these environment variables: ``BENCH_INPUT``, ``BENCH_OUTPUT`` (topics), ``BENCH_GAP_MS``,
``BENCH_GRACE_MS``. The topology is the example's own ``sessions.build``, unchanged.
"""

from __future__ import annotations

import inspect
import os

from streamproc.dsl import Topology
from topologies import sessions


def build() -> Topology:
    source = os.environ.get("BENCH_INPUT", sessions.INPUT)
    sink = os.environ.get("BENCH_OUTPUT", sessions.OUTPUT)
    gap = int(os.environ.get("BENCH_GAP_MS", sessions.GAP_MS))
    grace = int(os.environ.get("BENCH_GRACE_MS", sessions.GRACE_MS))
    if "input" in inspect.signature(sessions.build).parameters:
        return sessions.build(gap=gap, grace=grace, input=source, output=sink)
    sessions.INPUT, sessions.OUTPUT = source, sink  # older build(): reads the module's topic names
    return sessions.build(gap=gap, grace=grace)
