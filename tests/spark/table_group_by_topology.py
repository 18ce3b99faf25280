"""A test topology of KTable operators (two sub-topologies), for the Spark reprocessing tests.

``clicks`` read as a table (key: user, value: JSON ``{"page": ..., "n": ...}``: each user's last
click), filtered to the clicks with an even ``n``, regrouped by page (``group_by``, which writes the
``<application_id>-users-per-page-repartition`` topic of change records) and counted: the number of
users whose last kept click is on each page goes to ``users-per-page``.
"""

from __future__ import annotations

from streamproc import serde
from streamproc.dsl.builder import StreamsBuilder


def build():
    b = StreamsBuilder()
    last_click = b.table("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
    (last_click.filter(lambda user, click: click["n"] % 2 == 0)
     .group_by(lambda user, click: (click["page"], user), key_serde=serde.STRING, value_serde=serde.STRING,
               name="users-per-page")
     .count(name="page-user-counts")
     .to_stream()
     .to("users-per-page", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()
