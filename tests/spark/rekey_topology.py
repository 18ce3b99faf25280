"""A test topology with a repartition topic (two sub-topologies), for the Spark reprocessing tests.

``clicks`` (key: user, value: JSON ``{"page": ...}``) is re-keyed by page (``group_by``, which
writes the ``<application_id>-pages-repartition`` topic) and counted in session windows (gap 50 ms,
grace 20 ms); the counts go to ``page-sessions``.
"""

from __future__ import annotations

from streamproc import serde
from streamproc.dsl.builder import StreamsBuilder
from streamproc.dsl.windows import SessionWindows


def build():
    b = StreamsBuilder()
    clicks = b.stream("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
    (clicks.group_by(lambda user, click: click["page"], key_serde=serde.STRING, value_serde=serde.JSON,
                     name="pages")
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap=50, grace=20))
     .count(name="page-session-counts")
     .to_stream()
     .to("page-sessions"))
    return b.build()
