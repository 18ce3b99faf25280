"""The Kafka client library's log lines, rate-limited while a broker is away.

While a broker cannot be reached, aiokafka logs an ERROR or WARNING at every connection attempt
(thousands of lines a minute). :func:`limit_client_logs` attaches a :class:`RateLimit` filter to
every ``aiokafka`` logger: the first line of each kind (logger and message template) passes, then
at most one line of that kind every :data:`INTERVAL_S` seconds, carrying how many of its kind were
held back since (``(37 similar lines in 10 s not shown)``). A line of another kind, e.g. the one
saying a connection is back, always passes at once.

While the daemon starts (the first :data:`STARTUP_S` seconds), the client library also reports as
ERROR or WARNING what is normal on a healthy broker: the group coordinator is not available yet
right after a group or a topic is created. :class:`StartupNoise` logs those lines at INFO instead,
so a clean start logs no ERROR line; after the start-up window they keep their level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["INTERVAL_S", "STARTUP_S", "RateLimit", "StartupNoise", "limit_client_logs"]

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


#: How long after the start transient client errors are logged at INFO (seconds).
STARTUP_S = 60.0
#: Client messages that are normal while a group or its topics are being set up.
TRANSIENT = ("GroupCoordinatorNotAvailableError", "NotCoordinatorForGroupError", "Marking the coordinator dead",
             "LeaderNotAvailableError", "UnknownTopicOrPartitionError", "CoordinatorLoadInProgressError")


class StartupNoise(logging.Filter):
    """Logs at INFO the :data:`TRANSIENT` client lines of the first ``window_s`` seconds."""

    def __init__(self, window_s: float = STARTUP_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self.started = clock()

    def restart(self) -> None:
        """A new start-up window begins now."""
        self.started = self.clock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO and self.clock() - self.started < self.window_s:
            text = record.getMessage()
            if any(marker in text for marker in TRANSIENT):
                record.msg, record.args = f"{text} (usual while a group or topic is set up)", None
                record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return True


_FILTER = RateLimit()
_STARTUP = StartupNoise()


def limit_client_logs() -> None:
    """Attach the shared :class:`StartupNoise` (its window restarting now) and :class:`RateLimit`
    filters to every existing ``aiokafka`` logger (idempotent)."""
    _STARTUP.restart()
    manager = logging.Logger.manager
    names = [CLIENT_LOGGER, *(n for n in manager.loggerDict if n.startswith(CLIENT_LOGGER + "."))]
    for name in names:
        logger = logging.getLogger(name)
        for flt in (_STARTUP, _FILTER):
            if flt not in logger.filters:
                logger.addFilter(flt)
