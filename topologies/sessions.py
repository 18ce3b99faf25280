"""User sessions from a click stream: clicks and duration per session.

Topics and formats (string keys, JSON values):

- input ``clicks``: key = user id (UTF-8 string), value = a JSON object describing the click
  (e.g. ``{"page": "/cart"}``; the content is not used), timestamp = click time. What counts as a
  click: every record with a key, whatever its value (a JSON object, array, number or string, and
  JSON ``null`` too: session aggregations skip only records without a key, as Kafka Streams does).
  A record without a key cannot be grouped: it is dropped and counted in
  ``streamproc_dropped_records_total{operator="session-clicks", reason="null_key"}``; a value that
  is not JSON is a deserialization error (``deserialization_error_policy``).
- output ``session-stats``: key = user id, value =
  ``{"user": str, "start": int, "end": int, "clicks": int, "duration_ms": int}`` (start/end in epoch
  ms, both inclusive; ``duration_ms = end - start``), timestamp = session end. One record per session,
  written when the session closes, i.e. once stream time passes ``end + gap + grace``
  (``EmitStrategy.ON_WINDOW_CLOSE``).

Sessions: clicks of one user at most ``gap`` apart (default 30 minutes) share a session; clicks up to
``grace`` late (default 5 minutes) are still counted. The aggregation's store and changelog are named
``session-clicks`` (``<application_id>-session-clicks-changelog``).

Run: ``streamproc run topologies.sessions --bootstrap-servers localhost:9092 --application-id sessions``.
"""

from __future__ import annotations

from typing import Any

from streamproc import serde
from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder, Topology
from streamproc.records import Windowed
from streamproc.time import Duration

__all__ = ["GAP_MS", "GRACE_MS", "INPUT", "OUTPUT", "STORE", "build", "session_stats"]

INPUT = "clicks"
OUTPUT = "session-stats"
STORE = "session-clicks"
GAP_MS = 30 * 60_000
GRACE_MS = 5 * 60_000


def session_stats(window: Windowed, clicks: Any) -> tuple[str, dict[str, Any]]:
    """``(user, stats)`` for the output topic from a closed session and its click count."""
    return window.key, {"user": window.key, "start": window.start, "end": window.end, "clicks": clicks,
                        "duration_ms": window.end - window.start}


def build(gap: Duration = GAP_MS, grace: Duration = GRACE_MS,
          emit: EmitStrategy = EmitStrategy.ON_WINDOW_CLOSE, *, input: str = INPUT,
          output: str = OUTPUT) -> Topology:
    """The sessions topology (``gap``/``grace`` in ms or timedelta; topic names overridable)."""
    b = StreamsBuilder()
    (b.stream(input, key_serde=serde.STRING, value_serde=serde.JSON)
      .group_by_key()
      .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
      .count(name=STORE, emit=emit)
      .to_stream()
      .filter(lambda window, clicks: clicks is not None, name="drop-merged-sessions")
      .map(session_stats, name="session-stats")
      .to(output, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


topology = build()
