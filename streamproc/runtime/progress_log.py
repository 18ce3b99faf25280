"""A progress line at INFO while records flow.

Every ``progress_log_interval_ms`` (default 30 s; 0 = never), when records came in since the last
line, the daemon logs one line::

    progress: 120,000 records in (4,000/s), 119,800 out (3,993/s), lag 1,250, pending acks 312

``in``/``out`` are the records read from the input topics and written to output and repartition
topics since the previous line (rates over the interval); ``lag`` is the sum of
``streamproc_consumer_lag`` over the assigned partitions; ``pending acks`` the sends not yet
acknowledged by the brokers. The same figures are Prometheus metrics (docs/running.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .metrics import Metrics

__all__ = ["ProgressLog"]

log = logging.getLogger("streamproc.progress")


class ProgressLog:
    """Logs the progress line of the module docstring; :meth:`tick` is cheap between lines."""

    def __init__(self, metrics: Metrics, interval_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.interval_s = interval_ms / 1000
        self.clock = clock
        self._last_at = clock()
        self._last_in = 0.0
        self._last_out = 0.0

    def tick(self) -> str | None:
        """Log (and return) the progress line when an interval has passed and records came in."""
        if self.interval_s <= 0:
            return None
        now = self.clock()
        elapsed = now - self._last_at
        if elapsed < self.interval_s:
            return None
        m = self.metrics
        total_in = m.value("streamproc_records_in_total")
        total_out = m.value("streamproc_records_out_total")
        got_in, got_out = total_in - self._last_in, total_out - self._last_out
        self._last_at, self._last_in, self._last_out = now, total_in, total_out
        if got_in <= 0:
            return None
        line = (f"progress: {got_in:,.0f} records in ({got_in / elapsed:,.0f}/s), {got_out:,.0f} out "
                f"({got_out / elapsed:,.0f}/s), lag {m.value('streamproc_consumer_lag'):,.0f}, pending acks "
                f"{m.value('streamproc_pending_acks'):,.0f}")
        log.info("%s", line)
        return line
