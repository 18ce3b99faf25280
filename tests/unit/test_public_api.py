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
