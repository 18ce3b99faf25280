"""The Kafka client library's log lines, rate-limited while a broker is away.

While a broker cannot be reached, aiokafka logs an ERROR or WARNING at every connection attempt
(thousands of lines a minute). :func:`limit_client_logs` attaches a :class:`RateLimit` filter to
every ``aiokafka`` logger: the first line of each kind (logger and message template) passes, then
at most one line of that kind every :data:`INTERVAL_S` seconds, carrying how many of its kind were
held back since (``(37 similar lines in 10 s not shown)``). A line of another kind, e.g. the one
saying a connection is back, always passes at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["INTERVAL_S", "RateLimit", "limit_client_logs"]

#: At most one line of a kind per this many seconds.
INTERVAL_S = 10.0
#: The client library's logger names start with this.
CLIENT_LOGGER = "aiokafka"


class RateLimit(logging.Filter):
    """Passes the first record of each (logger, message template), then one per ``interval_s``."""

    def __init__(self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = (record.name, str(record.msg))
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held:
            record.msg = f"{record.msg} ({held} similar line(s) in {now - last:.0f} s not shown)"  # type: ignore[operator]
        return True


_FILTER = RateLimit()


def limit_client_logs() -> None:
    """Attach the shared :class:`RateLimit` to every existing ``aiokafka`` logger (idempotent)."""
    manager = logging.Logger.manager
    names = [CLIENT_LOGGER, *(n for n in manager.loggerDict if n.startswith(CLIENT_LOGGER + "."))]
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
