"""The pure parts of benchmarks/bench_peers.py (``benchmarks.peers.common``): expected outputs, the output check, percentiles,
latency triggers, profile folding and the results table. No Kafka, no peer venvs."""

from __future__ import annotations

import itertools
import json

import pytest

from benchmarks.peers import common
from benchmarks.peers.common import Click, Session

GAP = 100


def click(user: str, ts: int, partition: int = 0) -> Click:
    return Click(user.encode(), b"{}", ts, partition)


def by_hash(key: bytes, n: int) -> int:
    return sum(key) % n


# ---- input --------------------------------------------------------------------------------------


def test_generate_clicks_is_deterministic_and_partitioned() -> None:
    a = common.generate_clicks(2000, users=50, partitions=4, partitioner=by_hash, seed=3)
    b = common.generate_clicks(2000, users=50, partitions=4, partitioner=by_hash, seed=3)
    assert a == b and len(a) == 2000
    assert all(c.partition == by_hash(c.key, 4) for c in a)
    assert len({c.user for c in a}) == 50
    assert all(json.loads(c.value)["page"].startswith("/p") for c in a)
    late = sum(1 for prev, c in itertools.pairwise(a) if c.ts < prev.ts)
    assert 0 < late < 400          # about 5% jittered back


def test_generate_clicks_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="users=0"):
        common.generate_clicks(10, users=0, partitions=1, partitioner=by_hash)


def test_flush_markers_one_per_partition_and_ignored_by_checks() -> None:
    markers = common.flush_clicks(3, after_ts=10_000)
    assert [m.partition for m in markers] == [0, 1, 2]
    assert all(common.is_flush(m.user) and m.ts == 10_000 for m in markers)
    assert common.merged_sessions(markers, GAP) == []


# ---- expected sessions -----------------------------------------------------------------------------


def test_merged_sessions_split_on_more_than_gap_and_merge_out_of_order() -> None:
    clicks = [click("a", 0), click("a", 100), click("a", 201), click("b", 50),
              click("a", 400), click("a", 300)]     # 300 arrives late and bridges 201 .. 400
    assert common.merged_sessions(clicks, GAP) == [
        Session("a", 100, 2),        # 0, 100 (exactly gap apart: same session)
        Session("a", 400, 3),        # 201, 300, 400
        Session("b", 50, 1),
    ]


def test_arrival_sessions_do_not_merge() -> None:
    clicks = [click("a", 0), click("a", 201), click("a", 150), click("a", 400)]
    # arrival order: 201 closes [0]; 150 joins [201] (within gap of its last click); 400 closes it
    assert common.arrival_sessions(clicks, GAP) == [Session("a", 0, 1), Session("a", 201, 2),
                                                    Session("a", 400, 1)]


def test_expected_sessions_per_peer() -> None:
    clicks = [click("a", 0), click("a", 50), click("b", 10), click("a", 1000)] + common.flush_clicks(1, 10**6)
    merged = [Session("a", 50, 2), Session("a", 1000, 1), Session("b", 10, 1)]
    assert common.expected_sessions("streamproc", clicks, GAP) == merged
    assert common.expected_sessions("quix", clicks, GAP) == merged
    assert common.expected_sessions("faust", clicks, GAP) == merged
    # Quix's key closing: only a's first session; its watermark 1000 >= 50 + 1 + 2*100 + grace 0
    assert common.expected_sessions("quix-key", clicks, GAP, grace=0) == [Session("a", 50, 2)]
    assert common.expected_sessions("quix-key", clicks, GAP, grace=800) == []
    assert common.expected_sessions("passthrough", clicks, GAP) == [
        Session("a", 0, 1), Session("a", 50, 1), Session("a", 1000, 1), Session("b", 10, 1)]


def test_parse_output_of_each_peer() -> None:
    sp = json.dumps({"user": "a", "start": 0, "end": 50, "clicks": 2, "duration_ms": 50}).encode()
    assert common.parse_output("streamproc", b"a", sp, 50) == Session("a", 50, 2)
    assert common.parse_output("faust", b"a", sp, 0) == Session("a", 50, 2)
    quix = json.dumps({"start": 0, "end": 51, "value": 2}).encode()
    assert common.parse_output("quix", b"a", quix, 0) == Session("a", 50, 2)
    assert common.parse_output("quix-key", b"a", quix, 0) == Session("a", 50, 2)
    assert common.parse_output("passthrough", b"a", b"{}", 77) == Session("a", 77, 1)
    with pytest.raises(ValueError, match="no value"):
        common.parse_output("quix", b"a", None, 0)
    with pytest.raises(ValueError, match="unknown peer 'kafka-streams'"):
        common.parse_output("kafka-streams", b"a", b"{}", 0)


# ---- the output check ------------------------------------------------------------------------------


def test_check_sessions_ok_and_ignores_markers() -> None:
    expected = [Session("a", 50, 2), Session("b", 10, 1)]
    got = [Session("b", 10, 1), Session(common.FLUSH_PREFIX + "0", 0, 1), Session("a", 50, 2)]
    r = common.check_sessions(got, expected)
    assert r.ok and (r.records, r.clicks, r.expected_records, r.expected_clicks) == (2, 3, 2, 3)


@pytest.mark.parametrize("got, fragment", [
    ([Session("a", 50, 2)], "1 missing"),                                            # lost
    ([Session("a", 50, 2), Session("b", 10, 1), Session("b", 10, 1)], "1 unexpected"),  # duplicate
    ([Session("a", 50, 1), Session("a", 49, 1), Session("b", 10, 1)], "unexpected"),    # wrongly split
])
def test_check_sessions_fails_on_lost_duplicate_or_split(got: list[Session], fragment: str) -> None:
    r = common.check_sessions(got, [Session("a", 50, 2), Session("b", 10, 1)])
    assert not r.ok
    assert fragment in r.message and "expected 2 / 3" in r.message


def test_check_sessions_same_counts_but_wrong_sessions_fail() -> None:
    # same number of records and clicks, different sessions: a count-only check would pass
    r = common.check_sessions([Session("a", 60, 2), Session("b", 10, 1)], [Session("a", 50, 2), Session("b", 10, 1)])
    assert not r.ok and r.records == r.expected_records and r.clicks == r.expected_clicks


# ---- percentiles and latency triggers -----------------------------------------------------------


def test_percentile_nearest_rank() -> None:
    values = [15, 20, 35, 40, 50]
    assert common.percentile(values, 30) == 20
    assert common.percentile(values, 40) == 20
    assert common.percentile(values, 50) == 35
    assert common.percentile(values, 100) == 50
    assert common.percentile(list(range(1, 101)), 99) == 99
    assert common.percentile(list(range(1000, 0, -1)), 99) == 990     # input order does not matter
    assert common.percentile([7.5], 1) == 7.5


@pytest.mark.parametrize("values, p", [([], 50), ([1], 0), ([1], 100.5)])
def test_percentile_rejects_bad_input(values: list[float], p: float) -> None:
    with pytest.raises(ValueError):
        common.percentile(values, p)


def test_latency_summary() -> None:
    s = common.latency_summary([float(x) for x in range(1, 201)])
    assert (s["n"], s["p50"], s["p99"], s["max"], s["min"]) == (200, 100.0, 198.0, 200.0, 1.0)
    assert common.latency_summary([]) == {"n": 0}


def test_trigger_index_per_close_rule() -> None:
    # partition 0: a at 0, b at 50, b at 150, c at 300, b at 400; partition 1: d at 500
    clicks = [click("a", 0), click("b", 50), click("b", 150), click("c", 300), click("b", 400),
              click("d", 500, partition=1)]
    idx = common.TriggerIndex(clicks, gap=GAP, grace=10)
    a = Session("a", 0, 1)
    assert idx.trigger_ms("streamproc", a) == 150      # partition time reaches 0 + 100 + 10 + 1
    assert idx.trigger_ms("quix", a) == 300            # ... and 0 + 1 + 200 + 10 = 211 later
    assert idx.trigger_ms("quix-key", a) is None       # a never clicks again
    assert idx.trigger_ms("faust", Session("b", 150, 2)) == 400   # b's next click more than gap later
    assert idx.trigger_ms("streamproc", Session("b", 400, 3)) is None   # only the marker closes it
    assert idx.trigger_ms("streamproc", Session("d", 500, 1)) is None   # partition 1 never moves on
    assert idx.trigger_ms("passthrough", Session("d", 500, 1)) == 500


# ---- reporting ---------------------------------------------------------------------------------------


def test_ratios_and_table() -> None:
    rows = [{"peer": "streamproc", "computes": "sessions", "records_per_s": 30_000.0, "cpu_s": 10.0,
             "cpu_us_per_record": 33.3, "rss_mb": 120.0, "latency_p50_ms": 12.0, "latency_p99_ms": 80.0,
             "check": "ok"},
            {"peer": "faust", "computes": "table", "records_per_s": 3_000.0, "check": "ok"},
            {"peer": "quix", "computes": "windows", "records_per_s": None, "check": "FAILED: 1 missing"}]
    by_peer = {r["peer"]: r for r in rows}
    assert common.ratios(by_peer) == {"faust": 10.0}
    for r in rows:
        r["streamproc_ratio"] = common.ratios(by_peer).get(r["peer"])
    table = common.render_table(rows).splitlines()
    assert table[0].startswith("| peer | computes | records/s | streamproc ÷ peer |")
    assert table[1] == "|---|---|---|---|---|---|---|---|---|---|"
    assert table[2] == "| streamproc | sessions | 30,000 | – | 10.00 | 33.3 | 120 | 12.0 | 80.0 | ok |"
    assert table[3] == "| faust | table | 3,000 | 10.00× | – | – | – | – | – | ok |"
    assert table[4] == "| quix | windows | – | – | – | – | – | – | – | FAILED: 1 missing |"


def test_fold_profile() -> None:
    folded = ("main (x.py:1);process (streamproc/runtime/task.py:10);loads (json/__init__.py:3) 6\n"
              "main (x.py:1);process (streamproc/runtime/task.py:12) 3\n"
              "main (x.py:1);select (selectors.py:9) 1\n")
    p = common.fold_profile(folded, top=2)
    assert p["samples"] == 10
    assert p["self"] == [(0.6, "loads (json/__init__.py:3)"), (0.3, "process (streamproc/runtime/task.py:12)")]
    assert p["inclusive"] == [(0.9, "process (streamproc/runtime/task.py)")]
    assert common.fold_profile("")["samples"] == 0


def test_second_half_rate_from_the_commit_trace() -> None:
    from benchmarks.peers.kafka_io import Progress

    p = Progress(ready_at=0.0, done_at=10.0, trace=[(1.0, 0), (2.0, 300), (4.0, 500), (6.0, 800), (9.0, 1000)])
    assert p.second_half_rate() == (1000 - 500) / (10.0 - 4.0)
    assert Progress(ready_at=0.0, done_at=None, trace=[(1.0, 10)]).second_half_rate() is None
    assert Progress(ready_at=0.0, done_at=1.0).second_half_rate() is None
