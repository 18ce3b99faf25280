"""The CLI: parser layout, topology loading, describe, usage errors (exit status 2)."""

from __future__ import annotations

import pytest

from streamproc.cli import COMMANDS, Command, UsageError, build_parser, load_topology, main
from streamproc.dsl.topology import Topology


def test_load_topology_forms() -> None:
    assert isinstance(load_topology("topologies.sessions"), Topology)
    assert isinstance(load_topology("topologies.currency:build"), Topology)
    assert isinstance(load_topology("topologies.currency:topology"), Topology)
    with pytest.raises(UsageError, match="cannot import topology module 'no_such_module'"):
        load_topology("no_such_module")
    with pytest.raises(UsageError, match="has no attribute 'nope'"):
        load_topology("topologies.sessions:nope")
    with pytest.raises(UsageError, match="gave str"):
        load_topology("topologies.sessions:INPUT")


def test_describe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "topologies.currency", "--application-id", "cur"]) == 0
    out = capsys.readouterr().out
    assert "Sub-topology: 0" in out and "cur-convert-repartition" in out


def test_run_config_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "topologies.sessions", "--application-id", "a", "--commit-interval-ms", "x"]) == 2
    assert "commit_interval_ms (from flag --commit-interval-ms): 'x' is not an integer" in capsys.readouterr().err
    assert main(["run", "topologies.sessions", "--application-id", "a",
                 "--processing-guarantee", "exactly_once_v2", "--producer-config", "acks=1"]) == 2
    assert "cannot be used with processing_guarantee=exactly_once_v2" in capsys.readouterr().err


def test_parser_has_every_setting_and_is_extensible() -> None:
    args = build_parser().parse_args(["run", "m", "--producer-config", "linger_ms=1", "--producer-config", "acks=1",
                                      "--loop", "asyncio", "--log-level", "debug"])
    assert args.producer_config == ["linger_ms=1", "acks=1"] and args.loop == "asyncio"
    assert not hasattr(args, "commit_interval_ms")  # not given: lower-precedence sources decide
    assert [c.name for c in COMMANDS] == ["run", "describe", "reprocess", "native"]
    extra = Command("inspect", "extra", lambda p: p.add_argument("topology"), lambda a: 0)
    parsed = build_parser([*COMMANDS, extra]).parse_args(["inspect", "topologies.sessions"])
    assert parsed.handler(parsed) == 0
