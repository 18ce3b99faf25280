"""What a new user sees from the daemon on a real broker: a clean start logs no ERROR line and
progress lines while records flow; a user function that raises ends it with one ERROR line that names
the record's position once and the user's file and line; lag is exported for every assigned
partition from its assignment."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import exit_code, read_topic, running_app, streamproc_command, wait_until
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
BASE_TS = 1_700_000_000_000

WORDCOUNT_MODULE = '''
import os
from topologies import wordcount

def build():
    return wordcount.build(input=os.environ["LOGS_TEST_INPUT"], output=os.environ["LOGS_TEST_OUTPUT"])
'''

FAILING_MODULE = '''
import os
from streamproc import StreamsBuilder, serde

def build():
    b = StreamsBuilder()
    (b.stream(os.environ["LOGS_TEST_INPUT"], key_serde=serde.STRING, value_serde=serde.JSON)
      .map_values(lambda v: 100 // v["n"])
      .to(os.environ["LOGS_TEST_OUTPUT"]))
    return b.build()
'''


def _start(tmp_path: Path, module: str, bootstrap: str, source: str, sink: str, log: Path,
           *flags: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOGS_TEST_INPUT": source, "LOGS_TEST_OUTPUT": sink,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    env = {k: v for k, v in env.items() if not k.startswith("STREAMPROC_") or k in ("STREAMPROC_CACHE",)}
    return subprocess.Popen([*streamproc_command(), "run", module, f"--bootstrap-servers={bootstrap}",
                             f"--application-id={unique_name('logs')}", "--commit-interval-ms=300", *flags],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))


async def test_a_clean_start_logs_no_error_and_progress_lines_while_records_flow(
        kafka_bootstrap: str, topic_factory: Any, tmp_path: Path) -> None:
    (tmp_path / "logs_wordcount.py").write_text(WORDCOUNT_MODULE)
    source = await topic_factory(2, prefix="lines")
    sink = unique_name("counts")
    lines = [f"the quick brown fox {i % 7} jumps over the lazy dog" for i in range(3000)]
    await produce(kafka_bootstrap, source, [Out(f"k{i}".encode(), line.encode(), BASE_TS + i)
                                            for i, line in enumerate(lines)])
    log = tmp_path / "daemon.log"
    # the daemon creates its output, repartition and changelog topics itself: a fresh group, fresh topics
    proc = _start(tmp_path, "logs_wordcount", kafka_bootstrap, source, sink, log, "--progress-log-interval-ms=200")
    try:
        out = await read_topic(kafka_bootstrap, sink, 1, timeout=90)
        assert out, log.read_text()[-3000:]
        await wait_until(lambda: "progress: " in log.read_text(), 60, "a progress line")
        proc.send_signal(signal.SIGTERM)
        rc = await exit_code(proc, log, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 0, text[-3000:]
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert errors == [], "\n".join(errors)
    progress = [line for line in text.splitlines() if "streamproc.progress: progress: " in line]
    assert progress, text[-3000:]
    assert re.search(r"progress: [\d,]+ records in \([\d,]+/s\), [\d,]+ out \([\d,]+/s\), lag [\d,]+, "
                     r"pending acks [\d,]+$", progress[0]), progress[0]


async def test_a_user_function_that_raises_ends_the_daemon_with_one_error_line(
        kafka_bootstrap: str, topic_factory: Any, tmp_path: Path) -> None:
    (tmp_path / "logs_failing.py").write_text(FAILING_MODULE)
    source = await topic_factory(1, prefix="nums")
    sink = unique_name("out")
    metas = await produce(kafka_bootstrap, source, [Out(b"k", json.dumps({"n": n}).encode(), BASE_TS + i)
                                                    for i, n in enumerate([5, 4, 0, 2])])
    log = tmp_path / "fatal.log"
    proc = _start(tmp_path, "logs_failing", kafka_bootstrap, source, sink, log)
    try:
        rc = await exit_code(proc, log, 90)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 1, text[-3000:]
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert len(errors) == 1, "\n".join(errors)
    position = f"{source}[0]@{metas[2].offset}"
    assert errors[0].count(position) == 1, errors[0]
    assert "raised ZeroDivisionError" in errors[0] and "(in <lambda> at " in errors[0], errors[0]
    assert re.search(r"logs_failing\.py:8; record key 'k'\)", errors[0]), errors[0]
    assert "Traceback" not in text


async def test_lag_is_exported_for_every_assigned_partition_from_assignment(
        kafka_bootstrap: str, topic_factory: Any) -> None:
    """Only partition 0 has records: partitions 1 and 2 are never fetched from, yet their lag (0) is
    exported from the assignment; partition 0's comes from the fetches."""
    from streamproc import StreamsBuilder

    source = await topic_factory(3, prefix="lag")
    sink = unique_name("lag-out")
    await produce(kafka_bootstrap, source, [Out(b"k", b"v", BASE_TS + i, partition=0) for i in range(20)])
    b = StreamsBuilder()
    b.stream(source).to(sink)
    async with running_app(b.build(), kafka_bootstrap, unique_name("lag"), wait_tasks=3) as app:
        await read_topic(kafka_bootstrap, sink, 20, timeout=60)

        def exported(partition: int) -> bool:
            return any(s.labels.get("partition") == str(partition) and s.labels.get("topic") == source
                       for metric in app.metrics.registry.collect() if metric.name == "streamproc_consumer_lag"
                       for s in metric.samples)

        await wait_until(lambda: exported(1) and exported(2), 30, "the lag of the partitions without records")
        assert app.metrics.value("streamproc_consumer_lag", topic=source, partition="1") == 0
        assert app.metrics.value("streamproc_consumer_lag", topic=source, partition="2") == 0
