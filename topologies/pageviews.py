"""Page views joined with ad clicks within 10 minutes, and views per page per 1-minute window.

Topics and formats (string keys, JSON values):

- input ``page-views``: key = user id, value = ``{"page": str, ...}``, timestamp = view time.
- input ``ad-clicks``: key = user id, value = ``{"ad": str, ...}``, timestamp = click time.
  Both topics must have the same number of partitions and be keyed by user id (the join is
  per partition).
- output ``views-with-clicks``: key = user id, value = ``{"user": str, "page": str, "ad": str | null}``.
  One record per (view, click) pair of a user at most ``join_window`` apart (default 10 minutes),
  timestamp = the later of the two; a view that no click joined gives one record with ``"ad": null``
  (timestamp = the view's), written once its window has closed: when stream time passes
  ``view time + 2 * join_window + join_grace`` (until then a click could still arrive on time and
  join it) (a windowed left join, docs/windows.md).
- output ``page-view-counts``: key = page, value = ``{"page": str, "start": int, "end": int,
  "views": int}`` for the window ``[start, end)``. One record per page and 1-minute tumbling window
  (``count_window``) that had views, written once when the window closes (stream time of the page's
  partition passes ``end + count_grace``), timestamp = ``end - 1``. Views later than that are dropped
  and counted (``dropped_records_late``).

Stores (changelog ``<application_id>-<store>-changelog``): ``views-with-clicks-this-join-store`` and
``views-with-clicks-other-join-store`` (the join buffers), ``views-with-clicks-outer-shared-join-store``
(views not joined yet), ``page-views-per-minute`` (the window counts) and
``page-views-per-minute-progress``. Views are re-keyed by page through
``<application_id>-by-page-repartition``.

Run: ``streamproc run topologies.pageviews --bootstrap-servers localhost:9092 --application-id pageviews``.
"""

from __future__ import annotations

from typing import Any

from streamproc import serde
from streamproc.dsl import EmitStrategy, JoinWindows, StreamsBuilder, TimeWindows, Topology
from streamproc.records import Windowed
from streamproc.time import Duration

__all__ = ["CLICKS", "COUNTS", "COUNT_STORE", "JOINED", "JOIN_NAME", "VIEWS", "build", "page_count", "view_with_click"]

VIEWS = "page-views"
CLICKS = "ad-clicks"
JOINED = "views-with-clicks"
COUNTS = "page-view-counts"
JOIN_NAME = "views-with-clicks"
COUNT_STORE = "page-views-per-minute"
JOIN_WINDOW_MS = 10 * 60_000
JOIN_GRACE_MS = 60_000
COUNT_WINDOW_MS = 60_000
COUNT_GRACE_MS = 10_000


def view_with_click(view: dict[str, Any], click: dict[str, Any] | None) -> dict[str, Any]:
    """The joined value of a view and a click within the window (None: no click joined the view)."""
    return {"page": view["page"], "ad": None if click is None else click["ad"]}


def page_count(window: Windowed, views: int) -> tuple[str, dict[str, Any]]:
    """``(page, {"page", "start", "end", "views"})`` for the output topic from a closed window."""
    return window.key, {"page": window.key, "start": window.start, "end": window.end, "views": views}


def build(join_window: Duration = JOIN_WINDOW_MS, join_grace: Duration = JOIN_GRACE_MS,
          count_window: Duration = COUNT_WINDOW_MS, count_grace: Duration = COUNT_GRACE_MS, *,
          views: str = VIEWS, clicks: str = CLICKS, joined: str = JOINED, counts: str = COUNTS) -> Topology:
    """The page-views topology (durations in ms or timedelta; topic names as keywords)."""
    b = StreamsBuilder()
    page_views = b.stream(views, key_serde=serde.STRING, value_serde=serde.JSON)
    ad_clicks = b.stream(clicks, key_serde=serde.STRING, value_serde=serde.JSON)
    (page_views
     .left_join(ad_clicks, view_with_click, JoinWindows.of_time_difference_and_grace(join_window, join_grace),
                name=JOIN_NAME)
     .map_values(lambda user, value: {"user": user, **value}, with_key=True, name="add-user")
     .to(joined, key_serde=serde.STRING, value_serde=serde.JSON))
    (page_views
     .select_key(lambda user, view: view["page"], name="page-of-view")
     .group_by_key(key_serde=serde.STRING, name="by-page")
     .windowed_by(TimeWindows.of_size_and_grace(count_window, count_grace))
     .count(name=COUNT_STORE, emit=EmitStrategy.ON_WINDOW_CLOSE)
     .to_stream()
     .map(page_count, name="page-count")
     .to(counts, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


topology = build()
