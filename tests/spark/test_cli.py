"""``streamproc reprocess`` through its argument parser (in-process: it reuses the test session)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamproc.spark.cli import add_reprocess_parser, main
from tests.support.spark import gen_sessions_input, write_jsonl


def test_parser_registers_reprocess_with_its_defaults() -> None:
    parser = argparse.ArgumentParser(prog="streamproc")
    add_reprocess_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reprocess", "topologies.sessions", "--input", "clicks=kafka:clicks",
                              "--output", "out", "--conf", "spark.sql.shuffle.partitions=4"])
    assert (args.order, args.updates, args.master, args.encoding, args.verbose) == ("offset", False, None, "text",
                                                                                    False)
    assert args.conf == ["spark.sql.shuffle.partitions=4"]
    assert args.func.__name__ == "run_reprocess"
    with pytest.raises(SystemExit):
        parser.parse_args(["reprocess", "topologies.sessions", "--input", "c=x", "--output", "o",
                           "--order", "arrival"])


def test_cli_reprocesses_and_prints_the_summary(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recs = gen_sessions_input(10_000, partitions=4, seed=17)
    path = write_jsonl(tmp_path / "clicks.jsonl", recs, bad_lines=["{oops"])
    out = tmp_path / "out"
    status = main(["topologies.sessions", "--input", f"clicks={path}", "--output", f"json:{out}",
                   "--order", "offset", "--updates", "--rejects", str(tmp_path / "rej")])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert f"records in:       {len(recs) + 1}" in printed.out
    assert "rejected:         1 -> " in printed.out
    assert "dropped:" in printed.out and "records out:" in printed.out and "reprocess finished in" in printed.out
    assert "stage 1/1: sub-topology 0 reads clicks" in printed.err
    table = [json.loads(x) for f in (out / "table").glob("*.json") for x in f.read_text().splitlines()]
    assert table and all(r["topic"] == "session-stats" for r in table)
    rejects = [json.loads(x) for f in (tmp_path / "rej").glob("*.json") for x in f.read_text().splitlines()]
    assert [r["error"] for r in rejects] == ["malformed record: {oops"]


def test_cli_reports_bad_requests_with_status_2(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_jsonl(tmp_path / "clicks.jsonl", gen_sessions_input(10))
    assert main(["topologies.sessions", "--input", f"nope={path}", "--output", str(tmp_path / "o")]) == 2
    assert "not external source topics" in capsys.readouterr().err
    assert main(["topologies.sessions", "--input", "clicks", "--output", str(tmp_path / "o")]) == 2
    assert "TOPIC=SOURCE" in capsys.readouterr().err
    assert main(["topologies.sessions:nothing", "--input", f"clicks={path}", "--output", str(tmp_path / "o")]) == 2
    assert "no attribute 'nothing'" in capsys.readouterr().err
    out = tmp_path / "exists"
    assert main(["topologies.sessions", "--input", f"clicks={path}", "--output", str(out), "-q"]) == 0
    capsys.readouterr()
    # an existing output is refused before Spark starts: one line, status 2
    assert main(["topologies.sessions", "--input", f"clicks={path}", "--output", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists; pass --overwrite" in err, err


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to create a SparkSession fails the test: the check must come first."""
    import streamproc.spark.session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started before the request was checked")

    monkeypatch.setattr(streamproc.spark.session, "spark_session", refuse)


@pytest.mark.parametrize(("extra", "message"), [
    (["--master", "locl[2]"], "--master 'locl[2]' is not a Spark master URL"),
    (["--master", "local[0]"], "--master 'local[0]' is not a Spark master URL"),
    (["--master", "spark://127.0.0.1"], "is not a Spark master URL"),
    (["--conf", "spark.executor.memory"], "--conf 'spark.executor.memory' must be KEY=VALUE"),
    (["--conf", "executor.memory=2g"], "Spark settings start with 'spark.'"),
    (["--kafka-option", "kafka.security.protocol"], "--kafka-option 'kafka.security.protocol' must be KEY=VALUE"),
    (["--repartition-partitions", "0"], "--repartition-partitions 0: must be at least 1"),
    (["--application-id", " "], "--application-id is empty"),
    (["--encoding", "binary", "--output-kind", "json"], "--encoding binary needs Parquet output"),
    (["--output-kind", "kafka2"], "'{topic}' may appear once"),
    (["--output-kind", "file"], "is a file; give a directory"),
    (["--rejects-file"], "is a file; give a directory"),
    (["--input", "clicks=kafka:clicks"], "--input given twice"),
    (["--module", "no_such_module_xyz"], "no_such_module_xyz"),
    (["--input-kafka"], "kafka: inputs and outputs need --bootstrap-servers"),
])
def test_each_bad_request_is_one_line_and_status_2_before_spark_starts(
        no_spark, tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str) -> None:
    path = write_jsonl(tmp_path / "clicks.jsonl", gen_sessions_input(10))
    module, inputs, output = "topologies.sessions", ["--input", f"clicks={path}"], str(tmp_path / "o")
    (tmp_path / "a-file").write_text("x")
    rest: list[str] = []
    it = iter(extra)
    for arg in it:
        if arg == "--output-kind":
            kind = next(it)
            output = {"json": f"json:{tmp_path / 'o'}", "kafka2": "kafka:{topic}-{topic}",
                      "file": str(tmp_path / "a-file")}[kind]
        elif arg == "--rejects-file":
            rest += ["--rejects", str(tmp_path / "a-file")]
        elif arg == "--module":
            module = next(it)
        elif arg == "--input-kafka":
            inputs = ["--input", "clicks=kafka:clicks"]
        else:
            rest.append(arg)
    status = main([module, *inputs, "--output", output, *rest])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("streamproc reprocess: error: "), err
    assert message in err, err
    assert "Traceback" not in err


def _run_cli(args: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamproc.cli", "reprocess", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=240, check=False)


def test_spark_output_stays_off_the_console_unless_verbose(tmp_path: Path) -> None:
    """A fresh command (its own JVM): without --verbose stderr holds only our own lines (the
    stage lines), nothing from the JVM, log4j or py4j; with --verbose Spark's own output shows."""
    path = write_jsonl(tmp_path / "clicks.jsonl", gen_sessions_input(2_000))
    quiet = _run_cli(["topologies.sessions", "--input", f"clicks={path}", "--output", str(tmp_path / "a")])
    assert quiet.returncode == 0, quiet.stderr
    assert "reprocess finished in" in quiet.stdout
    lines = quiet.stderr.splitlines()
    assert lines and all(line.startswith(("reprocess topologies.sessions:", "stage 1/1:")) for line in lines), lines
    assert sorted(p.name for p in Path(tmp_path / "a").iterdir()) == ["table"]

    verbose = _run_cli(["topologies.sessions", "--input", f"clicks={path}", "--output", str(tmp_path / "b"),
                        "--verbose", "-q"])
    assert verbose.returncode == 0, verbose.stderr
    assert "log4j" in verbose.stderr or " WARN " in verbose.stderr, verbose.stderr
