"""The public API names of the README and docs/dsl.md import from where it says, and nothing public pulls in PySpark."""

from __future__ import annotations

import subprocess
import sys

import streamproc


def test_design_names_import_from_the_package() -> None:
    from streamproc import (  # noqa: F401
        EmitStrategy,
        SessionWindows,
        StreamApp,
        StreamsBuilder,
        Topology,
        TopologyTestDriver,
        Windowed,
        serde,
    )
    from streamproc.purgatory import DelayedOperation, DelayedOperationPurgatory, Timer, TimerTask  # noqa: F401
    from streamproc.stores import NOT_PUT, VALID_TO_UNDEFINED, Stores, VersionedRecord  # noqa: F401


def test_all_names_exist() -> None:
    missing = [n for n in streamproc.__all__ if not hasattr(streamproc, n)]
    assert missing == []


def test_importing_streamproc_does_not_import_pyspark() -> None:
    code = "import sys, streamproc, streamproc.cli; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_cli_knows_run_describe_and_reprocess() -> None:
    from streamproc.cli import build_parser

    parser = build_parser()
    for command in ("run", "describe", "reprocess"):
        args = parser.parse_args([command, "topologies.sessions"] +
                                 (["--input", "clicks=kafka:clicks", "--output", "/tmp/x"] if command == "reprocess" else []))
        assert args.command == command


def test_streamproc_testing_is_the_drivers_public_home() -> None:
    from streamproc.testing import TestInputTopic, TestOutputTopic, TopologyTestDriver
    from topologies import sessions

    assert TopologyTestDriver is streamproc.TopologyTestDriver
    with TopologyTestDriver(sessions.build(gap=10, grace=0)) as d:
        topic = d.input_topic("clicks")
        assert isinstance(topic, TestInputTopic)
        for ts in (0, 5, 100):
            topic.pipe("u", {"page": "/"}, ts)
        out = d.output_topic("session-stats")
        assert isinstance(out, TestOutputTopic)
        assert [r.value["clicks"] for r in out.read_records()] == [2]
