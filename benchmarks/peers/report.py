"""Writing the results: JSON, the Markdown report, the PNG chart, and the copy in docs/."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.charts import pyplot

from .common import render_summary, render_table

DOC_BEGIN = "<!-- bench-peers:begin (written by python -m benchmarks.bench_peers --publish) -->"
DOC_END = "<!-- bench-peers:end -->"
CHART_NAME = "bench-peers.png"
LABELS = {"passthrough": "aiokafka passthrough\n(ceiling)", "streamproc": "streamproc",
          "quix": "Quix Streams\n(closing=partition)",
          "quix-key": "Quix Streams\n(closing=key)", "faust": "faust-streaming",
          "kstreams": "Kafka Streams\n(record cache)", "kstreams-nocache": "Kafka Streams\n(no cache)",
          "kstreams-rocksdb": "Kafka Streams\n(RocksDB store)",
          "bytewax": "Bytewax"}
COLORS = {"passthrough": "#9e9e9e", "streamproc": "#1f77b4", "kstreams": "#d62728", "kstreams-nocache": "#e377c2",
          "kstreams-rocksdb": "#8c564b",
          "bytewax": "#9467bd", "quix": "#ff7f0e", "quix-key": "#ffbb78", "faust": "#2ca02c"}


def _one_line(label: str) -> str:
    return label.replace("\n", " ")


def chart(rows: Sequence[Mapping[str, Any]], path: Path, title: str, rate: int = 0,
          sizes: Sequence[Mapping[str, Any]] = ()) -> bool:
    """Four panels: records/s, CPU µs per record, peak RSS (one bar per input size of ``sizes``,
    else of ``rows``), latency p50/p99 of ``rows`` (log scale when one peer dwarfs the others).
    Returns False, after one line saying so, when matplotlib is not installed."""
    plt = pyplot(path.name)
    if plt is None:
        return False
    from matplotlib.ticker import FuncFormatter, NullFormatter

    groups = list(sizes) or [{"records": 0, "rows": list(rows)}]
    peers: list[str] = []
    for g in groups:
        peers += [r["peer"] for r in g["rows"] if r["peer"] not in peers]
    names = [LABELS.get(p, p) for p in peers]
    colors = [COLORS.get(p, "#7f7f7f") for p in peers]
    fig, axes = plt.subplots(2, 2, figsize=(16, 10))
    thousands = FuncFormatter(lambda v, _: f"{v:,.0f}")
    width = 0.8 / len(groups)

    def bars(ax: Any, key: str, label: str, fmt: str) -> None:
        present = []
        for i, g in enumerate(groups):
            by_peer = {r["peer"]: r for r in g["rows"]}
            vals = [(by_peer.get(p) or {}).get(key) or 0 for p in peers]
            if key != "rss_mb":  # a figure counts only when the output check passed
                vals = [v if (by_peer.get(p) or {}).get("check_ok") else 0 for v, p in zip(vals, peers)]
            xs = [x + (i - (len(groups) - 1) / 2) * width for x in range(len(peers))]
            b = ax.bar(xs, vals, width=width * 0.95, color=colors, alpha=1.0 if i == 0 else 0.55,
                       hatch=None if i == 0 else "//", edgecolor="white")
            present += [v for v in vals if v]
            for rect, v, p in zip(b, vals, peers):
                limited = (by_peer.get(p) or {}).get("limited_to")
                text = (format(v, fmt) + (f"\n(first {limited:,})" if limited else "")) if v else \
                    ("not run" if p not in by_peer or by_peer[p].get("skipped") else "no figure")
                base = rect.get_height() if v else 0.02
                ax.annotate(text, (rect.get_x() + rect.get_width() / 2, base), ha="center", va="bottom",
                            xycoords="data" if v else ("data", "axes fraction"),
                            fontsize=6.5 if len(groups) > 1 else 8, rotation=0 if v else 90)
        if present and max(present) / min(present) > 30:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(thousands)
            ax.yaxis.set_minor_formatter(NullFormatter())
            label += ", log scale"
        if len(groups) > 1:
            label += "; " + ", ".join(f"{'solid' if i == 0 else 'hatched'}: {g['records']:,} clicks"
                                      for i, g in enumerate(groups))
        ax.set_title(label, fontsize=9)
        ax.set_xticks(list(range(len(peers))), names, rotation=30, ha="right", rotation_mode="anchor")
        ax.tick_params(axis="x", labelsize=7)

    bars(axes[0][0], "records_per_s", "throughput, records/s (higher is better)", ",.0f")
    bars(axes[0][1], "cpu_us_per_record", "CPU µs per record (lower is better)", ".1f")
    bars(axes[1][0], "rss_mb", "peak RSS, MB", ",.0f")
    ax = axes[1][1]
    by_peer = {r["peer"]: r for r in rows}
    xs = range(len(peers))
    p50 = [(by_peer.get(p) or {}).get("latency_p50_ms") or 0 for p in peers]
    p99 = [(by_peer.get(p) or {}).get("latency_p99_ms") or 0 for p in peers]
    ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50", color=colors, alpha=0.6)
    ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99", color=colors)
    for x, a, b in zip(xs, p50, p99):
        if a:
            ax.annotate(f"{a:,.0f}", (x - 0.2, a), ha="center", va="bottom", fontsize=7)
        if b:
            ax.annotate(f"{b:,.0f}", (x + 0.2, b), ha="center", va="bottom", fontsize=7)
        if not a and not b:
            ax.annotate("not measured" if (by_peer.get(peers[x]) or {}).get("latency_note") else "no figure", (x, 0.02), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=8)
    ax.set_xticks(list(xs), names, rotation=30, ha="right", rotation_mode="anchor")
    ax.tick_params(axis="x", labelsize=7)
    values = [v for v in p50 + p99 if v]
    log = bool(values) and max(values) / min(values) > 30
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(thousands)
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_title(f"end-to-end latency ms at {rate:,} records/s (p50 light, p99 dark{'; log' if log else ''})",
                 fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def markdown(results: Mapping[str, Any]) -> str:
    """The report: conditions, the table, ratios vs the targets, the in-process row, the profile."""
    env = results["env"]
    run = (f"Run {env['started']} ({'quick' if env['quick'] else 'full'} mode) on {env['machine']}; "
           f"load average (1, 5, 15 min) before / after: {env['load_before']} / {env['load_after']}.")
    counts = " and ".join(f"{n:,}" for n in env.get("sizes") or [env["records"]])
    sizes = (f"Throughput input: {counts} clicks of {env['users']:,} users on {env['partitions']} "
             f"partitions (+ {env['partitions']} end-of-input markers), gap {env['gap_ms'] // 60000} min, "
             f"grace {env['grace_ms'] // 60000} min. Latency (table and chart): {env['latency_rate']:,} records/s for "
             f"{env['latency_seconds']} s, gap {env['latency_gap_ms']} ms, grace {env['latency_grace_ms']} ms.")
    lines = [run, sizes, ""]
    if env.get("command"):
        lines += [f"Command: `{env['command']}`", ""]
    if env.get("versions"):
        lines += ["Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()) + ".", ""]
    by_size = results.get("sizes") or [{"records": env["records"], "rows": results["rows"]}]
    labels = {p: _one_line(v) for p, v in LABELS.items()}
    intro = ("Every peer side by side (÷ passthrough = the peer's records/s ÷ the passthrough's in the same "
             "run; a figure counts only when the output check passed):")
    lines += [intro, "",
              render_summary(by_size, labels), ""]
    for size in by_size:
        lines += [f"Details, {size['records']:,} clicks:", "",
                  render_table([r for r in size["rows"] if not r.get("skipped")]), ""]
    rates = env.get("latency_rates") or []
    if len(rates) > 1 and any(row.get("latency_by_rate") for row in results["rows"]):
        intro = ("End-to-end latency p50 / p99 ms at each input rate (a peer that cannot keep up with a rate "
                 "shows a growing backlog, not a processing delay):")
        lines += [intro, "",
                  "| peer | " + " | ".join(f"{r:,}/s" for r in rates) + " |", "|---" * (len(rates) + 1) + "|"]
        for row in results["rows"]:
            cells = []
            for r in rates:
                lat = (row.get("latency_by_rate") or {}).get(r) or (row.get("latency_by_rate") or {}).get(str(r))
                summary = (lat or {}).get("latency")
                cells.append(f"{summary['p50']:,.1f} / {summary['p99']:,.1f}" if summary else "–")
            lines.append(f"| {row['peer']} | " + " | ".join(cells) + " |")
        lines.append("")
    halves = [f"{r['peer']} {r['second_half_records_per_s']:,.0f}" for r in results["rows"]
              if r.get("check_ok") and r.get("second_half_records_per_s")]
    if halves:
        lines += ["Records/s over the second half of each peer's input (steady state, from the committed offsets "
                  "polled every 50 ms; commits come every second): " + ", ".join(halves) + ".", ""]
    t = results.get("targets") or {}
    if t:
        lines.append("Targets (records/s, same run): " + "; ".join(
            f"streamproc ÷ {k} = {v['ratio']:.2f}× (target ≥ {v['target']}×: {'met' if v['met'] else 'NOT met'})"
            for k, v in t.items()))
        lines.append("")
    inproc = results.get("inproc")
    if inproc and "error" not in inproc:
        head = (f"In-process, no Kafka (`bench_task_path.py`, CPU time, best of {inproc['repeat']}): "
                f"{inproc['records']:,} records, {inproc['users']:,} users, batch {inproc['batch']}.")
        task = (f"| streamproc `Task.process` (sessions topology) | {inproc['task_per_s']:,.0f} | "
                f"{1e6 / inproc['task_per_s']:.2f} |")
        floor = (f"| hand-written sessionizer (floor) | {inproc['floor_per_s']:,.0f} | "
                 f"{1e6 / inproc['floor_per_s']:.2f} |")
        lines += [head, "", "| path | records/s | µs/record |", "|---|---|---|", task, floor, "",
                  f"streamproc / hand-written: {inproc['task_per_s'] / inproc['floor_per_s']:.2f}", ""]
    elif inproc:
        lines += [f"In-process comparison failed: {inproc['error']}", ""]
    for peer, prof in (results.get("profiles") or {}).items():
        if not prof.get("samples"):
            lines += [f"py-spy profile of {peer} failed: {prof.get('error', 'no samples')}"[:300], ""]
            continue
        head = (f"py-spy profile of {peer} over {prof['records']:,} clicks ({prof['samples']} samples at "
                f"{prof['rate']} Hz; {prof['records_per_s_under_profiler']:,.0f} records/s under the profiler, "
                f"{prof['cpu_s']:.1f} CPU s in {prof['seconds']:.1f} s):")
        lines += [head, "", "| self % | frame |", "|---|---|"]
        lines += [f"| {100 * s:.1f} | `{f}` |" for s, f in prof["self"][:12]]
        lines += ["", f"| inclusive % | {peer} function |", "|---|---|"]
        lines += [f"| {100 * s:.1f} | `{f}` |" for s, f in prof["inclusive"][:12]]
        lines.append("")
    return "\n".join(lines)


def write(results: Mapping[str, Any], out: Path) -> tuple[Path, Path, Path | None]:
    """``results.json``, ``results.md`` and the chart (None when matplotlib is missing) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    j = out / "results.json"
    j.write_text(json.dumps(results, indent=2, default=str) + "\n")
    md = out / "results.md"
    md.write_text(markdown(results) + "\n")
    png = out / CHART_NAME
    env = results["env"]
    counts = " and ".join(f"{n:,}" for n in env.get("sizes") or [env["records"]])
    drawn = chart(results["rows"], png, f"streamproc vs peers ({'quick' if env['quick'] else 'full'} run "
                                        f"{env['started']}), {counts} clicks, one broker, {env['machine']}, "
                                        f"load before {env['load_before']}", rate=env.get("latency_rate", 0),
                  sizes=results.get("sizes") or ())
    return j, md, png if drawn else None


def publish(md_text: str, png: Path | None, repo: Path) -> None:
    """Copy the chart (if drawn) to docs/img/ and the report between the markers of docs/benchmarks.md."""
    if png is not None:
        (repo / "docs" / "img").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, repo / "docs" / "img" / CHART_NAME)
    doc = repo / "docs" / "benchmarks.md"
    text = doc.read_text() if doc.exists() else f"# Benchmarks\n\n{DOC_BEGIN}\n{DOC_END}\n"
    if DOC_BEGIN not in text or DOC_END not in text:
        text += f"\n{DOC_BEGIN}\n{DOC_END}\n"
    image = f"![streamproc vs peers](img/{CHART_NAME})\n\n" if png is not None else ""
    block = f"{DOC_BEGIN}\n\n{md_text}\n{image}{DOC_END}"
    text = re.sub(re.escape(DOC_BEGIN) + r".*?" + re.escape(DOC_END), lambda _: block, text, flags=re.DOTALL)
    doc.write_text(text)
