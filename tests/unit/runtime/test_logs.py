"""What the daemon logs: the progress line, the client library's start-up noise, the restore lines."""

from __future__ import annotations

import logging

import pytest

from streamproc.runtime.client_logs import RateLimit, StartupNoise
from streamproc.runtime.metrics import Metrics
from streamproc.runtime.progress_log import ProgressLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_every_interval_while_records_flow(caplog: pytest.LogCaptureFixture) -> None:
    metrics, clock = Metrics(), Clock()
    progress = ProgressLog(metrics, 30_000, clock)
    metrics.records_in.labels("in", "0").inc(900)
    metrics.records_out.labels("out").inc(600)
    metrics.lag.labels("in", "0").set(40)
    metrics.lag.labels("in", "1").set(2)
    metrics.pending_acks.set(7)
    clock.now += 29.9
    assert progress.tick() is None  # not yet
    clock.now += 0.1
    with caplog.at_level(logging.INFO, logger="streamproc.progress"):
        line = progress.tick()
    assert line == "progress: 900 records in (30/s), 600 out (20/s), lag 42, pending acks 7"
    assert [r.getMessage() for r in caplog.records] == [line]
    clock.now += 30
    assert progress.tick() is None  # nothing came in: no line
    metrics.records_in.labels("in", "1").inc(3000)
    clock.now += 60
    assert progress.tick() == "progress: 3,000 records in (50/s), 0 out (0/s), lag 42, pending acks 7"
    assert ProgressLog(metrics, 0, clock).tick() is None  # 0: never


def _record(level: int, msg: str, name: str = "aiokafka.consumer.group_coordinator") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_startup_noise_of_the_client_is_logged_at_info_only_while_starting() -> None:
    clock = Clock()
    noise = StartupNoise(window_s=60, clock=clock)
    transient = _record(logging.ERROR, "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError")
    assert noise.filter(transient) and transient.levelno == logging.INFO and transient.levelname == "INFO"
    assert "usual while a group or topic is set up" in transient.getMessage()
    other = _record(logging.ERROR, "Unexpected error in fetcher")
    assert noise.filter(other) and other.levelno == logging.ERROR  # not a known transient: kept
    clock.now += 61
    late = _record(logging.ERROR, "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError")
    assert noise.filter(late) and late.levelno == logging.ERROR  # after the start: a real problem


def test_rate_limit_holds_back_repeats_and_counts_them() -> None:
    clock = Clock()
    limit = RateLimit(interval_s=10, clock=clock)
    assert limit.filter(_record(logging.ERROR, "Unable connect to %s"))
    assert not limit.filter(_record(logging.ERROR, "Unable connect to %s"))
    clock.now += 10
    again = _record(logging.ERROR, "Unable connect to %s")
    assert limit.filter(again) and "(1 similar line(s) in 10 s not shown)" in str(again.msg)


def test_restore_progress_is_first_logged_after_one_interval(caplog: pytest.LogCaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from aiokafka import TopicPartition

    from streamproc.runtime import restore

    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    restorer = restore.Restorer("127.0.0.1:1", "c", Metrics(), log_interval_ms=2000)
    tp = TopicPartition("app-s-changelog", 0)
    part = restore._Partition(tp, store=None, end=1000, position=10, restored=10)
    job = restore.RestoreJob("0_0", {tp: part}, lambda: None, started=clock.now, prepared=True)
    restorer._jobs["0_0"] = job
    with caplog.at_level(logging.INFO, logger=restore.__name__):
        clock.now += 0.025
        restorer._report()  # 25 ms in: no line with a meaningless rate
        assert caplog.records == []
        clock.now += 2.0
        part.position, part.restored = 510, 510
        restorer._report()
    assert [r.getMessage() for r in caplog.records] == [
        "task 0_0: restoring app-s-changelog[0]: offset 510, end 1000, remaining 490, rate 252 records/s"]
