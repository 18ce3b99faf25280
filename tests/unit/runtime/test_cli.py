"""The CLI: parser layout, topology loading, describe, usage errors (exit status 2)."""

from __future__ import annotations

import pytest

from streamproc.cli import COMMANDS, Command, build_parser, load_topology, main
from streamproc.dsl.topology import Topology
from streamproc.engine.loading import TopologyLoadError


def test_load_topology_forms() -> None:
    assert isinstance(load_topology("topologies.sessions"), Topology)
    assert isinstance(load_topology("topologies.currency:build"), Topology)
    assert isinstance(load_topology("topologies.currency:topology"), Topology)
    with pytest.raises(TopologyLoadError, match="cannot import topology module 'no_such_module'"):
        load_topology("no_such_module")
    with pytest.raises(TopologyLoadError, match="has no attribute 'nope'"):
        load_topology("topologies.sessions:nope")
    with pytest.raises(TopologyLoadError, match="gave str"):
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


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("streamproc ")


def test_a_mistyped_option_shows_the_command_usage_and_the_closest_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--bootstrap-sever", "localhost:9092", "topologies.sessions"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: streamproc run ")
    assert "streamproc run: error: unrecognized option --bootstrap-sever (did you mean --bootstrap-servers?)" in err
    assert main(["describe", "topologies.sessions", "--fromat", "mermaid"]) == 2
    assert "did you mean --format?" in capsys.readouterr().err
    assert main(["describe", "topologies.sessions", "extra"]) == 2
    assert "unexpected argument(s): extra" in capsys.readouterr().err


def test_every_option_of_every_command_has_help() -> None:
    import argparse

    for command in COMMANDS:
        parser = argparse.ArgumentParser(prog=f"streamproc {command.name}")
        command.configure(parser)
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{command.name} {action.option_strings} has no help"


def test_describe_mermaid_prints_only_the_diagram(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "topologies.wordcount", "--format", "mermaid", "--application-id", "wc"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "flowchart TD"
    assert all(line.startswith("  ") for line in lines[1:]), [line for line in lines[1:] if not line.startswith("  ")]
    assert "wc-words-repartition" in out


def test_describe_text_names_real_topics_and_changelogs_for_an_application_id(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "topologies.wordcount", "--application-id", "wc"]) == 0
    out = capsys.readouterr().out
    assert "<application_id>" not in out
    assert "(topic: wc-words-repartition)" in out and "changelog: wc-" in out
    assert main(["describe", "topologies.wordcount"]) == 0
    assert "<application_id>" in capsys.readouterr().out


def test_a_topology_module_in_the_current_directory_is_found(tmp_path, monkeypatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mytopo_in_cwd.py").write_text(
        "from streamproc import StreamsBuilder\n\n"
        "def build():\n    b = StreamsBuilder()\n    b.stream('in').to('out')\n    return b.build()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    assert main(["describe", "mytopo_in_cwd"]) == 0
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: [in])" in capsys.readouterr().out
    assert main(["describe", "mytopo_in_cwd.py"]) == 2
    assert "give the module name: 'mytopo_in_cwd'" in capsys.readouterr().err
    assert main(["describe", "not_in_cwd_either"]) == 2
    assert f"no module 'not_in_cwd_either' in the current directory ({tmp_path})" in capsys.readouterr().err


def test_unknown_topic_config_exits_2_before_start(capsys: pytest.CaptureFixture[str]) -> None:
    # no broker at this address: the key is refused before anything connects
    assert main(["run", "topologies.sessions", "--application-id", "a", "--bootstrap-servers", "127.0.0.1:1",
                 "--topic-config", "min.insync.replicas=2", "--topic-config", "retention.mss=5"]) == 2
    err = capsys.readouterr().err
    assert "topic_config (from flag --topic-config): unknown Kafka topic config 'retention.mss'; did you mean " \
           "'retention.ms'" in err
    assert "Traceback" not in err


def test_errors_in_the_users_module_are_one_line_naming_file_and_line(tmp_path, monkeypatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken_dep.py").write_text("import nonexistent_pkg_for_test\n")
    (tmp_path / "broken_syntax.py").write_text("def build(:\n")
    (tmp_path / "broken_build.py").write_text(
        "from streamproc import StreamsBuilder\n\ndef build():\n    b = StreamsBuilder()\n    b.stream('in').to('')\n"
        "    return b.build()\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text("topology = None\n")
    monkeypatch.chdir(tmp_path)
    expected = {
        "broken_dep": "topology module 'broken_dep' failed to import at broken_dep.py:1: ModuleNotFoundError: "
                      "No module named 'nonexistent_pkg_for_test'",
        "broken_syntax": f"topology module 'broken_syntax' has a syntax error at {tmp_path}/broken_syntax.py:1",
        "broken_build": "building the topology of 'broken_build' failed at broken_build.py:5: ValueError: to() "
                        "needs a non-empty topic name",
        "sub/deep.py": f"'sub/deep.py' is a file path; give a module name: run from its folder (cd {tmp_path}/sub) "
                       f"with 'deep', or add that folder to PYTHONPATH",
    }
    for module, message in expected.items():
        assert main(["describe", module]) == 2
        err = capsys.readouterr().err
        assert message in err, err
        assert "Traceback" not in err and err.count("\n") == 1, err
