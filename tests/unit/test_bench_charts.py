"""The benchmarks' charts are optional: without matplotlib each chart is skipped with one line.

matplotlib is not in the README's set-up, so ``bench_peers --quick`` must finish there: these
tests make ``import matplotlib`` fail (a ``None`` entry in ``sys.modules``), then run the chart code
paths of ``benchmarks/peers/report.py`` (``write`` and ``publish``, what ``bench_peers`` calls) and
``benchmarks/bench_purgatory.py``, and check the single skip line, that nothing else failed and
that no PNG was written. Also covers the side-by-side table the report starts with.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_purgatory, charts
from benchmarks.peers import common, report

ROWS: list[dict[str, Any]] = [
    {"peer": "passthrough", "computes": "copy", "records_per_s": 100_000.0, "cpu_s": 1.0, "cpu_us_per_record": 2.0,
     "rss_mb": 40.0, "check_ok": True, "check": "ok: 10 records"},
    {"peer": "streamproc", "computes": "sessions", "records_per_s": 50_000.0, "cpu_s": 5.0,
     "cpu_us_per_record": 10.0, "rss_mb": 90.0, "check_ok": True, "check": "ok: 5 records"},
    {"peer": "kstreams", "computes": "sessions", "records_per_s": 80_000.0, "cpu_s": 3.0,
     "cpu_us_per_record": 6.0, "rss_mb": 300.0, "check_ok": False, "check": "FAILED: 1 missing"},
]


def _results() -> dict[str, Any]:
    env = {"started": "2026-11-25 20:00 UTC", "quick": True, "machine": "2 cores, x86_64", "load_before": "1 1 1",
           "load_after": "1 1 1", "records": 20_000, "sizes": [20_000], "users": 100, "partitions": 8,
           "gap_ms": 1_800_000, "grace_ms": 300_000, "latency_rate": 200, "latency_rates": [200],
           "latency_seconds": 6, "latency_gap_ms": 1000, "latency_grace_ms": 0}
    return {"env": env, "rows": ROWS, "sizes": [{"records": 20_000, "rows": ROWS}]}


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import matplotlib`` (and its submodules) raises ImportError, as on the README's set-up."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def _skip_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("chart skipped")]


def test_pyplot_without_matplotlib_prints_one_line(no_matplotlib: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert charts.pyplot("x.png") is None
    out = capsys.readouterr().out
    assert out == charts.SKIP_MESSAGE.format(what="x.png") + "\n"
    assert "pip install matplotlib" in out


def test_peer_report_without_matplotlib(no_matplotlib: None, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    j, md, png = report.write(_results(), tmp_path)
    assert png is None and j.exists() and md.exists()
    assert not list(tmp_path.glob("*.png"))
    assert _skip_lines(capsys.readouterr().out) == [charts.SKIP_MESSAGE.format(what=report.CHART_NAME)]
    # --publish without a chart: the report goes into the page, no image link, no PNG copied
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text(f"# B\n\n{report.DOC_BEGIN}\nold\n{report.DOC_END}\n")
    report.publish(md.read_text(), png, tmp_path)
    page = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "old" not in page and "| streamproc |" in page and "img/" not in page
    assert not (tmp_path / "docs" / "img").exists()


def test_purgatory_plot_without_matplotlib(no_matplotlib: None, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_purgatory.plot([], tmp_path / "p.png") is False
    assert _skip_lines(capsys.readouterr().out) == [charts.SKIP_MESSAGE.format(what="p.png")]
    assert not (tmp_path / "p.png").exists()


def test_peer_chart_is_drawn_when_matplotlib_is_there(tmp_path: Path) -> None:
    import matplotlib  # noqa: F401 - in the test extra: this test must run, not skip

    _, _, png = report.write(_results(), tmp_path)
    assert png is not None and png.stat().st_size > 10_000


def test_side_by_side_table() -> None:
    big = [dict(ROWS[0], records_per_s=90_000.0), dict(ROWS[1]), {"peer": "kstreams", "skipped": True,
                                                                     "check": "not run"}]
    table = common.render_summary([{"records": 20_000, "rows": ROWS}, {"records": 3_000_000, "rows": big}],
                                  {"passthrough": "aiokafka passthrough"}).splitlines()
    assert table[0] == ("| peer | records/s (20,000) | ÷ passthrough | CPU µs/record | peak RSS MB | output check "
                        "| records/s (3,000,000) | ÷ passthrough | CPU µs/record | peak RSS MB | output check |")
    assert table[2] == "| aiokafka passthrough | 100,000 | 1.00 | 2.0 | 40 | ok | 90,000 | 1.00 | 2.0 | 40 | ok |"
    assert table[3] == "| streamproc | 50,000 | 0.50 | 10.0 | 90 | ok | 50,000 | 0.56 | 10.0 | 90 | ok |"
    # a failed check shows no figure at all; a peer left out at a size says so
    assert table[4] == "| kstreams | – | – | – | – | FAILED | not run |  |  |  |  |"
