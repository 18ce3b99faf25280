"""``streamproc reprocess`` through its argument parser (in-process: it reuses the test session)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from streamproc.spark.cli import add_reprocess_parser, main
from tests.support.spark import gen_sessions_input, write_jsonl


def test_parser_registers_reprocess_with_its_defaults() -> None:
    parser = argparse.ArgumentParser(prog="streamproc")
    add_reprocess_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reprocess", "topologies.sessions", "--input", "clicks=kafka:clicks",
                              "--output", "out", "--conf", "spark.sql.shuffle.partitions=4"])
    assert (args.order, args.updates, args.master, args.encoding) == ("offset", False, "local[2]", "text")
    assert args.conf == [("spark.sql.shuffle.partitions", "4")]
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
