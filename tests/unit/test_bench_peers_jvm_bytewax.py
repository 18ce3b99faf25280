"""The pure parts of the Kafka Streams and Bytewax peers of ``benchmarks/bench_peers.py``.

No broker, JVM or Bytewax venv here: what each new peer must output, how its output is parsed, the
session store retention the Kafka Streams peer gets, the command lines, and that the Kafka Streams
build is skipped when its stamp matches the sources (a second run builds nothing).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.peers import common, jvm, procs
from benchmarks.peers.common import Click, Session

NEW_PEERS = ("kstreams", "kstreams-nocache", "kstreams-rocksdb", "bytewax")


def _click(user: str, ts: int, partition: int = 0) -> Click:
    return Click(user.encode(), b"{}", ts, partition)


def test_new_peers_must_output_the_merged_sessions() -> None:
    gap, grace = 100, 20
    clicks = [_click("a", 0), _click("a", 150), _click("a", 80),  # 80 bridges 0 and 150: one session
              _click("b", 10), _click("b", 111)]                   # 101 apart: two sessions
    clicks += common.flush_clicks(1, common.marker_ts(150, gap, grace))
    want = [Session("a", 150, 3), Session("b", 10, 1), Session("b", 111, 1)]
    for peer in NEW_PEERS:
        assert common.expected_sessions(peer, clicks, gap, grace) == want, peer
    assert common.expected_sessions("streamproc", clicks, gap, grace) == want


def test_new_peers_write_streamproc_output_format() -> None:
    value = json.dumps({"user": "a", "start": 10, "end": 50, "clicks": 2, "duration_ms": 40}).encode()
    for peer in NEW_PEERS:
        assert common.parse_output(peer, b"a", value, 50) == Session("a", 50, 2)


def test_bytewax_closes_on_the_users_own_watermark() -> None:
    rule = common.CLOSE_RULES["bytewax"]
    assert rule["scope"] == "key" and rule["marker_closes"]
    # Bytewax: closed when watermark - gap > last, watermark = the user's latest click - grace
    gap, grace, last = 100, 20, 1_000
    assert rule["close_after"](last, gap, grace) == last + gap + grace + 1
    for peer in ("kstreams", "kstreams-nocache", "kstreams-rocksdb"):
        assert common.CLOSE_RULES[peer]["close_after"] is not None
        assert common.CLOSE_RULES[peer]["close_after"](last, gap, grace) == \
            common.CLOSE_RULES["streamproc"]["close_after"](last, gap, grace)


def test_session_store_retention_covers_the_jump_to_the_marker() -> None:
    gap, grace = 1_800_000, 300_000
    retention = common.session_store_retention(gap, grace)
    last = 1_700_000_000_000
    # the emit step at the marker must still find a session that ended at the latest click,
    # even when the partition's latest click is (less than) one gap before the input's
    partition_stream_time = last - gap + 1
    marker = common.marker_ts(last, gap, grace)
    min_live = marker - retention + 1
    last_close = partition_stream_time - gap - grace
    assert min_live <= last_close
    assert retention > gap + grace


def test_passthrough_shares_count_checked_figures_only() -> None:
    rows = [{"peer": "passthrough", "records_per_s": 200.0, "check_ok": True},
            {"peer": "streamproc", "records_per_s": 100.0, "check_ok": True},
            {"peer": "bytewax", "records_per_s": 50.0, "check_ok": False}]
    assert common.passthrough_shares(rows) == {"passthrough": 1.0, "streamproc": 0.5}
    assert common.passthrough_shares(rows[1:]) == {}


def _run(peer: str, tmp_path: Path) -> procs.PeerRun:
    return procs.PeerRun(peer, "127.0.0.1:9092", f"g-{peer}", "in", "out", 100, 20, 8, tmp_path)


def test_command_lines(tmp_path: Path) -> None:
    argv, _ = procs.command(_run("kstreams", tmp_path))
    assert argv[0] == "java" and jvm.MAIN_CLASS in argv and "--cache-bytes" not in argv and "--store" not in argv
    assert argv[argv.index("--retention-ms") + 1] == str(common.session_store_retention(100, 20))
    argv, _ = procs.command(_run("kstreams-nocache", tmp_path))
    assert argv[argv.index("--cache-bytes") + 1] == "0"
    argv, _ = procs.command(_run("kstreams-rocksdb", tmp_path))
    assert argv[argv.index("--store") + 1] == "rocksdb"
    argv, _ = procs.command(_run("bytewax", tmp_path))
    assert argv[1].endswith("bytewax_app.py")
    assert argv[argv.index("--ready-file") + 1] == str(procs.ready_file(_run("bytewax", tmp_path)))


def test_kafka_streams_build_is_skipped_when_the_stamp_matches(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMPROC_CACHE", str(tmp_path))
    out = jvm.build_dir()
    assert out == tmp_path / "kstreams-peer"
    calls: list[Any] = []

    def fake_mvn(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        (out / "libs").mkdir(parents=True)
        (out / "libs" / f"kafka-streams-{jvm.kafka_streams_version()}.jar").write_bytes(b"")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(jvm.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(jvm.subprocess, "run", fake_mvn)
    assert jvm.ensure(quiet=True) == jvm.classpath()
    assert len(calls) == 1 and calls[0][0] == "mvn" and f"-Dpeer.build.dir={out}" in calls[0]
    assert jvm.ensure(quiet=True) == jvm.classpath()  # second call: nothing built
    assert len(calls) == 1
    (out / ".built-sha256").write_text("stale\n")     # a changed source: rebuilt
    jvm.ensure(quiet=True)
    assert len(calls) == 2


def test_kafka_streams_version_is_the_brokers_line() -> None:
    assert jvm.kafka_streams_version() == "4.3.1"
