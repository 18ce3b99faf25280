"""Dropped records made visible: a Prometheus counter per operator and reason, and a WARNING.

Operators count the records they drop (``dropped_records_<reason>``: ``late``, ``null_key``,
``null_value``, ``negative_timestamp``; stores count writes they reject as expired, reason
``store``); the error policies drop records too (``skip``). :class:`DropReporter` turns those
counts into

* ``streamproc_dropped_records_total{operator, reason}`` (exported as deltas, at every commit and
  when a task closes), and
* at most one WARNING a minute per operator: how many records it dropped since its previous
  warning, why, and for late records one example (``topic[partition]@offset``, its timestamp and
  the operator's stream time). The first drop of an operator is reported at the next export.
  :meth:`DropReporter.flush` reports what is pending regardless of the minute (at shutdown).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REASONS", "DropReporter"]

log = logging.getLogger("streamproc.drops")

#: Why each reason drops a record (the WARNING's words).
REASONS: dict[str, str] = {
    "late": "late: timestamp below the operator's stream time minus its window and grace",
    "null_key": "a None key (cannot be grouped, joined or stored)",
    "null_value": "a None value (nothing to join)",
    "negative_timestamp": "a negative timestamp (windows start at 0)",
    "store": "the store rejected the write as older than its retention",
    "deserialization_error": "could not be deserialized (deserialization_error_policy=skip)",
    "processing_error": "a user function raised (processing_error_policy=skip)",
}


class DropReporter:
    """Exports drop counts to ``counter`` (labels ``operator``, ``reason``) and logs them."""

    def __init__(self, counter: Any, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.counter = counter
        self.interval_s = interval_s
        self.clock = clock
        self._pending: dict[str, dict[str, int]] = {}
        self._examples: dict[str, str] = {}
        self._logged_at: dict[str, float] = {}

    def add(self, operator: str, reason: str, count: int = 1, example: str | None = None) -> None:
        """Count ``count`` records ``operator`` dropped for ``reason``."""
        if count <= 0:
            return
        self.counter.labels(operator, reason).inc(count)
        by_reason = self._pending.setdefault(operator, {})
        by_reason[reason] = by_reason.get(reason, 0) + count
        if example is not None:
            self._examples[operator] = example

    def export(self, counts: Mapping[tuple[str, str], int], exported: dict[tuple[str, str], int],
               late_example: Callable[[str], tuple[Any, Any, Any, int, int] | None]) -> None:
        """Add one task's counts (``{(operator, reason): total}``) beyond what ``exported`` (the
        task's already exported totals, updated here) holds, then log what is due."""
        for key, total in counts.items():
            delta = total - exported.get(key, 0)
            if delta > 0:
                operator, reason = key
                example = None
                if reason == "late" and (found := late_example(operator)) is not None:
                    topic, partition, offset, ts, stream_time = found
                    example = f"{topic}[{partition}]@{offset} with timestamp {ts} at stream time {stream_time}"
                self.add(operator, reason, delta, example)
                exported[key] = total
        self.log_due()

    def log_due(self, force: bool = False) -> None:
        """Log the pending drops of every operator whose last warning is a minute old (or all)."""
        now = self.clock()
        for operator in list(self._pending):
            last = self._logged_at.get(operator)
            if not force and last is not None and now - last < self.interval_s:
                continue
            by_reason = self._pending.pop(operator)
            example = self._examples.pop(operator, None)
            self._logged_at[operator] = now
            total = sum(by_reason.values())
            why = "; ".join(f"{n} {REASONS.get(reason, reason)}" for reason, n in sorted(by_reason.items()))
            since = "since its last report" if last is not None else "so far"
            log.warning("operator %r dropped %d record(s) %s (%s)%s; see streamproc_dropped_records_total",
                        operator, total, since, why, f"; e.g. {example}" if example else "")

    def flush(self) -> None:
        """Log everything pending now (at shutdown)."""
        self.log_due(force=True)
