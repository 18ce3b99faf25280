"""topologies/pageviews.py through the TopologyTestDriver (string keys, JSON values)."""

from __future__ import annotations

from streamproc.records import Record
from streamproc.testing import TopologyTestDriver
from topologies import pageviews

MIN = 60_000


def test_views_join_clicks_within_ten_minutes_and_unjoined_views_come_after_the_window() -> None:
    with TopologyTestDriver(pageviews.build(), application_id="pageviews") as d:
        views, clicks = d.input_topic(pageviews.VIEWS), d.input_topic(pageviews.CLICKS)
        out = d.output_topic(pageviews.JOINED)
        views.pipe("ann", {"page": "/shoes"}, 0)
        clicks.pipe("ann", {"ad": "sneakers"}, 9 * MIN)
        views.pipe("bob", {"page": "/"}, 2 * MIN)
        clicks.pipe("ann", {"ad": "boots"}, 11 * MIN)                 # 11 min after ann's view: no
        assert out.read_records() == [Record("ann", {"user": "ann", "page": "/shoes", "ad": "sneakers"}, 9 * MIN)]
        views.pipe("cat", {"page": "/"}, 23 * MIN)
        assert out.read_records() == []          # a click at >= 23 - 11 min is still on time and could join bob
        views.pipe("dan", {"page": "/"}, 23 * MIN + 1)                    # past 2 + 10 + 10 + 1 min: final
        assert out.read_records() == [Record("bob", {"user": "bob", "page": "/", "ad": None}, 2 * MIN)]


def test_views_per_page_per_minute_are_written_once_when_the_minute_closes() -> None:
    with TopologyTestDriver(pageviews.build(count_grace=0)) as d:
        views = d.input_topic(pageviews.VIEWS)
        for user, page, ts in [("ann", "/a", 1_000), ("bob", "/a", 59_999), ("cat", "/b", 30_000),
                               ("ann", "/a", 61_000), ("bob", "/a", 50_000), ("dan", "/c", 125_000)]:
            views.pipe(user, {"page": page}, ts)
        assert d.output_topic(pageviews.COUNTS).read_records() == [
            Record("/a", {"page": "/a", "start": 0, "end": MIN, "views": 2}, MIN - 1),
            Record("/b", {"page": "/b", "start": 0, "end": MIN, "views": 1}, MIN - 1),
            Record("/a", {"page": "/a", "start": MIN, "end": 2 * MIN, "views": 1}, 2 * MIN - 1),
        ]
        assert d.metrics["dropped_records_late"] == 1                    # bob's view at 50 s came after 61 s


def test_module_documents_topics_stores_and_exposes_build() -> None:
    doc = pageviews.__doc__ or ""
    for name in ("page-views", "ad-clicks", "views-with-clicks", "page-view-counts", "page-views-per-minute"):
        assert name in doc
    topology = pageviews.build(views="v", clicks="c", joined="j", counts="n")
    assert topology.source_topics() == {"v", "c", "by-page-repartition"}
    assert topology.sink_topics() == {"j", "n", "by-page-repartition"}
    subs = topology.subtopologies_for("pv")
    assert {s for sub in subs for s in sub.store_names} == {
        "views-with-clicks-this-join-store", "views-with-clicks-other-join-store",
        "views-with-clicks-outer-shared-join-store", "page-views-per-minute", "page-views-per-minute-progress"}
    assert any(sub.repartition_topics == {"pv-by-page-repartition"} for sub in subs)
