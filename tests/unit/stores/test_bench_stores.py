"""A short run of ``benchmarks/bench_stores.py`` (the CI version of the store benchmark): every
store and operation is measured next to its dict baseline, the range queries next to the naive
linear scan, and the growth and memory tables are printed. Asserts the report, not the speed."""

from __future__ import annotations

import re

from benchmarks import bench_stores as module


def test_short_run_prints_every_table(capsys) -> None:
    assert module.main(["--sizes", "200,2000", "--ops", "300", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for store, op in [("key_value", "get"), ("window", "fetch (key, 10 windows)"),
                      ("session", "find_sessions"), ("versioned", "get(key, as_of)")]:
        rows = [line for line in out.splitlines() if line.startswith("uniform") and f" {store} " in line
                and f" {op} " in line]
        assert len(rows) == 2, (store, op, rows)  # one row per size
    naive = re.findall(r"^(\w+)\s+.+ ours\s+([\d.]+)x\s+naive\s+([\d.]+)x$", out, re.M)
    assert {row[0] for row in naive} == {"key_value", "window", "session", "versioned"}
    assert "Growth, uniform access" in out and "Growth, hot access" in out
    assert re.search(r"^plain dict \(baseline\)\s+2,000", out, re.M)
