"""The pure parts of the peer benchmark: input data, what each peer must output, checks, statistics.

Nothing here talks to Kafka or needs a peer's venv, so ``tests/unit/test_bench_peers.py`` covers it.

Sessions are described the same way for every peer, as ``Session(user, last, clicks)``: the user,
the timestamp of the session's last click (ms) and its click count. Each peer's output is parsed
into that shape (:func:`parse_output`), then compared as a multiset with what that peer's own
rules must produce from the input (:func:`expected_sessions`, :func:`check_sessions`).
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CLOSE_RULES",
    "FLUSH_PREFIX",
    "MARKER_GAPS",
    "PEERS",
    "STREAMPROC_FORMAT",
    "CheckResult",
    "Click",
    "Session",
    "TriggerIndex",
    "arrival_sessions",
    "check_sessions",
    "expected_sessions",
    "flush_clicks",
    "generate_clicks",
    "is_flush",
    "latency_summary",
    "marker_ts",
    "merged_sessions",
    "parse_output",
    "passthrough_shares",
    "percentile",
    "ratios",
    "render_summary",
    "render_table",
    "session_store_retention",
]

MIN_MS = 60_000
BASE_TS = 1_700_000_000_000
FLUSH_PREFIX = "~flush-"


@dataclass(frozen=True)
class Click:
    """One input record: key and value as produced, event time, the partition it was written to."""

    key: bytes
    value: bytes
    ts: int
    partition: int

    @property
    def user(self) -> str:
        return self.key.decode()


@dataclass(frozen=True, order=True)
class Session:
    user: str
    last: int
    clicks: int


#: Peers in the order the harness runs them; the first is the ceiling, not a stream processor.
PEERS = ("passthrough", "streamproc", "kstreams", "kstreams-nocache", "kstreams-rocksdb", "bytewax", "quix",
         "quix-key", "faust")

#: Peers that write streamproc's output format (``{"user", "start", "end", "clicks", ...}``).
STREAMPROC_FORMAT = ("streamproc", "kstreams", "kstreams-nocache", "kstreams-rocksdb", "bytewax", "faust")

#: How each peer decides which clicks share a session and when a session is emitted.
#: ``sessions``: ``merge`` = event-time sessions (out-of-order clicks merge sessions); ``arrival`` =
#: the faust peer's hand-written per-user state (arrival order, no merging).
#: ``scope``: whose stream time closes a session: the whole ``partition``'s or the user's own (``key``).
#: ``close_after(last, gap, grace)``: the stream time at which a session whose last click is
#: ``last`` is emitted. ``marker_closes``: the end-of-input marker closes every open session.
CLOSE_RULES: dict[str, dict[str, Any]] = {
    # end < stream_time - gap - grace   (docs/semantics.md, "Session windows", ON_WINDOW_CLOSE; stream time per task)
    "streamproc": {"sessions": "merge", "scope": "partition", "marker_closes": True,
                   "close_after": lambda last, gap, grace: last + gap + grace + 1},
    # Kafka Streams (KStreamSessionWindowAggregate, onWindowClose): the same rule as streamproc's,
    # which the conformance suite (tests/conformance) checks against Kafka Streams itself
    "kstreams": {"sessions": "merge", "scope": "partition", "marker_closes": True,
                 "close_after": lambda last, gap, grace: last + gap + grace + 1},
    "kstreams-nocache": {"sessions": "merge", "scope": "partition", "marker_closes": True,
                         "close_after": lambda last, gap, grace: last + gap + grace + 1},
    "kstreams-rocksdb": {"sessions": "merge", "scope": "partition", "marker_closes": True,
                         "close_after": lambda last, gap, grace: last + gap + grace + 1},
    # Bytewax's SessionWindower under an EventClock kept per key (peers/bytewax_app.py): closed when
    # the user's watermark (latest click - grace) passes last + gap; the end of input closes the rest
    "bytewax": {"sessions": "merge", "scope": "key", "marker_closes": True,
                "close_after": lambda last, gap, grace: last + gap + grace + 1},
    # end_exclusive <= watermark - 2*gap - grace, end_exclusive = last + 1 (quixstreams session.py)
    "quix": {"sessions": "merge", "scope": "partition", "marker_closes": True,
             "close_after": lambda last, gap, grace: last + 1 + 2 * gap + grace},
    # Quix's default closing_strategy="key": the user's own watermark; the marker closes nothing
    "quix-key": {"sessions": "merge", "scope": "key", "marker_closes": False,
                 "close_after": lambda last, gap, grace: last + 1 + 2 * gap + grace},
    # the user's next click more than gap after the last one, or the end-of-input sweep
    "faust": {"sessions": "arrival", "scope": "key", "marker_closes": True,
              "close_after": lambda last, gap, grace: last + gap + 1},
}


# ---- input ----------------------------------------------------------------------------------------


def generate_clicks(n: int, users: int, partitions: int, partitioner: Callable[[bytes, int], int],
                    seed: int = 7, start_ts: int = BASE_TS, jitter: float = 0.05) -> list[Click]:
    """``n`` clicks of ``users`` users with mostly increasing event times.

    Event time advances by 0..400 ms per click (so each of 10k users clicks about every 33 min and
    sessions of 30 min gap form, grow and close); a ``jitter`` share of the clicks is moved back by
    up to 2 minutes (out of order, never late for a grace >= 2 min). Same distribution as
    ``benchmarks/bench_task_path.py``; deterministic for a seed.
    """
    if n < 0 or users <= 0 or partitions <= 0:
        raise ValueError(f"need n >= 0, users > 0, partitions > 0; got n={n}, users={users}, "
                         f"partitions={partitions}")
    rng = random.Random(seed)
    pages = [json.dumps({"page": f"/p{i}", "ref": "search"}).encode() for i in range(50)]
    keys = [f"user-{i:06d}".encode() for i in range(users)]
    part = {k: partitioner(k, partitions) for k in keys}
    ts = start_ts
    out = []
    for _ in range(n):
        ts += rng.randint(0, 400)
        t = ts - rng.randint(0, 2 * MIN_MS) if rng.random() < jitter else ts
        key = keys[rng.randrange(users)]
        out.append(Click(key, pages[rng.randrange(50)], t, part[key]))
    return out


def flush_clicks(partitions: int, after_ts: int) -> list[Click]:
    """One end-of-input marker per partition, far past every close rule, so every peer emits all
    the sessions of the real clicks. Its key starts with :data:`FLUSH_PREFIX`; checks ignore it."""
    return [Click(f"{FLUSH_PREFIX}{p}".encode(), b'{"flush":true}', after_ts, p) for p in range(partitions)]


#: The end-of-input marker comes this many gaps (+ grace) after the last click: past every peer's close rule.
MARKER_GAPS = 10


def marker_ts(last_ts: int, gap: int, grace: int) -> int:
    """The end-of-input markers' timestamp for an input whose latest click is at ``last_ts``."""
    return last_ts + MARKER_GAPS * gap + grace + 10


def session_store_retention(gap: int, grace: int) -> int:
    """Retention of Kafka Streams' in-memory session store in the benchmark (ms).

    Kafka Streams' in-memory session store drops every session whose end is more than its retention
    behind stream time before the emit-on-close step looks for closed sessions; with the default
    retention (``gap + grace``) that is exactly the sessions due to be emitted, so it would emit
    nothing. The retention must cover ``gap + grace`` plus the largest step of stream time between two
    records of a task: here the jump to the end-of-input marker (:func:`marker_ts`), plus one gap
    for the distance between a partition's latest click and the input's (enough while that is less
    than a gap; with 8 partitions and a click every 0–400 ms it is seconds)."""
    return gap + grace + (MARKER_GAPS + 1) * gap + grace + 10


def is_flush(user: str) -> bool:
    return user.startswith(FLUSH_PREFIX)


# ---- what each peer must emit ------------------------------------------------------------------


def merged_sessions(clicks: Iterable[Click], gap: int) -> list[Session]:
    """Event-time sessions: a user's clicks sorted by time, split where two are more than ``gap``
    apart (exactly ``gap`` apart share a session). This is what a merging session window gives
    when no click is late and every session is closed by the end-of-input marker."""
    by_user: dict[str, list[int]] = {}
    for c in clicks:
        if not is_flush(c.user):
            by_user.setdefault(c.user, []).append(c.ts)
    out = []
    for user, times in by_user.items():
        times.sort()
        count = 1
        for prev, t in itertools.pairwise(times):
            if t - prev > gap:
                out.append(Session(user, prev, count))
                count = 0
            count += 1
        out.append(Session(user, times[-1], count))
    return sorted(out)


def arrival_sessions(clicks: Iterable[Click], gap: int) -> list[Session]:
    """The faust peer's hand-written sessions: per user, in arrival order, a click more than
    ``gap`` after the session's latest click closes it and starts a new one; any other click joins
    it (an out-of-order click may lower its start). No merging."""
    open_: dict[str, list[int]] = {}
    out = []
    for c in clicks:
        user = c.user
        if is_flush(user):
            continue
        s = open_.get(user)
        if s is None:
            open_[user] = [c.ts, 1]
        elif c.ts - s[0] > gap:
            out.append(Session(user, s[0], s[1]))
            open_[user] = [c.ts, 1]
        else:
            s[0] = max(s[0], c.ts)
            s[1] += 1
    out.extend(Session(user, last, n) for user, (last, n) in open_.items())
    return sorted(out)


def expected_sessions(peer: str, clicks: Sequence[Click], gap: int, grace: int = 0) -> list[Session]:
    """What ``peer`` must emit for ``clicks`` (input order, end-of-input markers included)."""
    if peer == "passthrough":
        return sorted(Session(c.user, c.ts, 1) for c in clicks if not is_flush(c.user))
    rule = CLOSE_RULES[peer]
    sessions = merged_sessions(clicks, gap) if rule["sessions"] == "merge" else arrival_sessions(clicks, gap)
    if rule["marker_closes"]:
        return sessions
    # closed only by the user's own later clicks: those whose user's watermark reached close_after
    latest: dict[str, int] = {}
    for c in clicks:
        if not is_flush(c.user):
            latest[c.user] = max(c.ts, latest.get(c.user, c.ts))
    return [s for s in sessions if latest[s.user] >= rule["close_after"](s.last, gap, grace)]


def parse_output(peer: str, key: bytes | None, value: bytes | None, timestamp: int) -> Session:
    """One output record of ``peer`` as a :class:`Session`.

    * passthrough: the input click itself (``clicks`` = 1, ``last`` = its timestamp);
    * streamproc, Kafka Streams, Bytewax and the faust peer (:data:`STREAMPROC_FORMAT`):
      ``{"user", "start", "end", "clicks", ...}``, end inclusive;
    * quix ``session_window().count().final()``: ``{"start", "end", "value"}`` keyed by the user,
      end exclusive (last click + 1).
    """
    user = key.decode() if key is not None else ""
    if peer == "passthrough":
        return Session(user, timestamp, 1)
    if value is None:
        raise ValueError(f"{peer}: output record of key {user!r} has no value")
    v = json.loads(value)
    if peer in ("quix", "quix-key"):
        return Session(user, int(v["end"]) - 1, int(v["value"]))
    if peer in STREAMPROC_FORMAT:
        return Session(v.get("user", user), int(v["end"]), int(v["clicks"]))
    raise ValueError(f"unknown peer {peer!r}; expected one of {PEERS}")


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    records: int
    clicks: int
    expected_records: int
    expected_clicks: int
    message: str


def check_sessions(got: Iterable[Session], expected: Iterable[Session], examples: int = 3) -> CheckResult:
    """Compare a peer's output with what it must emit: same number of records, same click total,
    and the same multiset of sessions (so a duplicate, a lost or a wrongly split session fails)."""
    g = Counter(s for s in got if not is_flush(s.user))
    e = Counter(expected)
    n_got, n_exp = sum(g.values()), sum(e.values())
    c_got = sum(s.clicks * k for s, k in g.items())
    c_exp = sum(s.clicks * k for s, k in e.items())
    missing = e - g
    extra = g - e
    if not missing and not extra:
        return CheckResult(True, n_got, c_got, n_exp, c_exp, f"ok: {n_got} records, {c_got} clicks")
    parts = [f"{n_got} records / {c_got} clicks, expected {n_exp} / {c_exp}"]
    if missing:
        parts.append(f"{sum(missing.values())} missing, e.g. {sorted(missing)[:examples]}")
    if extra:
        parts.append(f"{sum(extra.values())} unexpected (duplicates or wrong), e.g. {sorted(extra)[:examples]}")
    return CheckResult(False, n_got, c_got, n_exp, c_exp, "; ".join(parts))


# ---- latency -------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in (0, 100]): the smallest value with at least p% of the
    values at or below it. Raises ``ValueError`` on an empty input or p out of range."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile p must be in (0, 100], got {p}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    if not latencies_ms:
        return {"n": 0}
    return {"n": len(latencies_ms), "p50": percentile(latencies_ms, 50), "p99": percentile(latencies_ms, 99),
            "max": max(latencies_ms), "min": min(latencies_ms)}


class TriggerIndex:
    """Finds, for one output session, the input click that made it due (its *trigger*).

    End-to-end latency of a session = when its output record was read - when its trigger click was
    produced. In the latency phase a click's event time is the wall-clock time it was produced, so
    the trigger's time is its timestamp. The trigger is the first click, in arrival order, that
    brings the stream time of the peer's close scope (:data:`CLOSE_RULES`: the session's partition,
    or its user) to the peer's ``close_after(last)``; for the passthrough, the click itself.

    ``trigger_ms`` returns None when no real click triggered the session (the end-of-input marker
    did); such sessions are left out of the latency figures.
    """

    def __init__(self, clicks: Sequence[Click], gap: int, grace: int) -> None:
        self.gap, self.grace = gap, grace
        self._running: dict[tuple[str, Any], list[int]] = {}   # running max of ts per scope, arrival order
        self._user_part: dict[str, int] = {}
        for c in clicks:
            if is_flush(c.user):
                continue
            for scope in (("partition", c.partition), ("key", c.user)):
                r = self._running.setdefault(scope, [])
                r.append(max(c.ts, r[-1]) if r else c.ts)
            self._user_part[c.user] = c.partition

    def trigger_ms(self, peer: str, session: Session) -> int | None:
        if peer == "passthrough":
            return session.last
        rule = CLOSE_RULES[peer]
        due = rule["close_after"](session.last, self.gap, self.grace)
        scope = ("key", session.user) if rule["scope"] == "key" else \
            ("partition", self._user_part.get(session.user, -1))
        running = self._running.get(scope, [])
        i = bisect.bisect_left(running, due)
        return running[i] if i < len(running) else None


# ---- reporting -----------------------------------------------------------------------------------


def ratios(results: Mapping[str, Mapping[str, Any]], of: str = "streamproc",
           key: str = "records_per_s") -> dict[str, float]:
    """``results[of][key] / results[peer][key]`` for every other peer with a figure."""
    mine = results.get(of, {}).get(key)
    out = {}
    for peer, r in results.items():
        if peer != of and mine and r.get(key):
            out[peer] = mine / r[key]
    return out


def _fmt(v: Any, spec: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return format(v, spec)


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown results table, one row per peer (missing figures show as ``–``)."""
    head = ("| peer | computes | records/s | streamproc ÷ peer | CPU s | CPU µs/record | peak RSS MB "
            "| latency p50 ms | latency p99 ms | output check |")
    lines = [head, "|" + "|".join(["---"] * 10) + "|"]
    for r in rows:
        lines.append("| " + " | ".join([
            str(r.get("peer", "?")),
            str(r.get("computes", "")),
            _fmt(r.get("records_per_s"), ",.0f"),
            _fmt(r.get("streamproc_ratio"), ".2f") + ("×" if r.get("streamproc_ratio") else ""),
            _fmt(r.get("cpu_s"), ".2f"),
            _fmt(r.get("cpu_us_per_record"), ".1f"),
            _fmt(r.get("rss_mb"), ",.0f"),
            _fmt(r.get("latency_p50_ms"), ",.1f"),
            _fmt(r.get("latency_p99_ms"), ",.1f"),
            str(r.get("check", "")),
        ]) + " |")
    return "\n".join(lines)


def passthrough_shares(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``records_per_s`` of each peer whose output check passed ÷ the passthrough's (the ceiling)."""
    base = next((r.get("records_per_s") for r in rows if r.get("peer") == "passthrough" and r.get("check_ok")), None)
    return {str(r["peer"]): r["records_per_s"] / base for r in rows
            if base and r.get("records_per_s") and r.get("check_ok")}


def render_summary(sizes: Sequence[Mapping[str, Any]], labels: Mapping[str, str] | None = None) -> str:
    """One Markdown table of every peer side by side, for each input size of the run.

    ``sizes`` = ``[{"records": N, "rows": [row, ...]}, ...]`` (rows as in :func:`render_table`).
    Per size: records/s, that ÷ the passthrough's records/s, CPU µs/record, peak RSS MB, and
    ``ok``/``FAILED``/``–`` for the output check (figures only when the check passed, else ``–``; a
    peer not run at a size shows ``not run``). Peers appear in the order of their first appearance.
    """
    labels = labels or {}
    peers: list[str] = []
    for size in sizes:
        for r in size["rows"]:
            if r["peer"] not in peers:
                peers.append(r["peer"])
    head = ["peer"]
    for size in sizes:
        n = f"{size['records']:,}"
        head += [f"records/s ({n})", "÷ passthrough", "CPU µs/record", "peak RSS MB", "output check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for peer in peers:
        cells = [labels.get(peer, peer)]
        for size in sizes:
            row = next((r for r in size["rows"] if r["peer"] == peer), None)
            if row is None or row.get("skipped"):
                cells += ["not run", "", "", "", ""]
                continue
            share = passthrough_shares(size["rows"]).get(peer)
            check = "ok" if row.get("check_ok") else ("FAILED" if row.get("check") else "–")
            if row.get("limited_to"):
                check += f" (first {row['limited_to']:,} clicks)"
            ok = bool(row.get("check_ok"))
            cells += [_fmt(row.get("records_per_s") if ok else None, ",.0f"), _fmt(share if ok else None, ".2f"),
                      _fmt(row.get("cpu_us_per_record") if ok else None, ".1f"),
                      _fmt(row.get("rss_mb") if ok else None, ",.0f"), check]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- py-spy profile --------------------------------------------------------------------------------


def _function(frame: str) -> str:
    """``name (path:line)`` -> ``name (path)``, so inclusive time adds up per function."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def fold_profile(folded: str, top: int = 15, include: Sequence[str] = ("streamproc", "topologies"),
                 exclude: Sequence[str] = ()) -> dict[str, Any]:
    """Summarise py-spy ``--format raw`` output (``frame;frame;... count`` lines): the ``top``
    frames by self samples and the ``top`` functions whose location contains one of ``include``
    (and none of ``exclude``: entry points that are 100% of everything) by inclusive samples, each
    as ``(share, frame)``."""
    self_samples: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        self_samples[frames[-1]] += n
        for f in {_function(f) for f in frames}:
            if any(s in f for s in include) and not any(s in f for s in exclude):
                inclusive[f] += n
    share = (lambda n: n / total) if total else (lambda n: 0.0)
    return {"samples": total,
            "self": [(share(n), f) for f, n in self_samples.most_common(top)],
            "inclusive": [(share(n), f) for f, n in inclusive.most_common(top)]}
