"""Testing a topology without a broker: the public home of :class:`TopologyTestDriver`.

As Kafka Streams ships its test driver in ``kafka-streams-test-utils`` and Bytewax in
``bytewax.testing``::

    from streamproc.testing import TopologyTestDriver

    with TopologyTestDriver(build(), application_id="t") as driver:
        driver.input_topic("clicks").pipe("alice", {"page": "/"}, 1_000)
        driver.output_topic("session-counts").read_records()

The driver runs the same :class:`~streamproc.engine.task.Task` as the daemon and Spark, one per
sub-topology, deterministically (records are processed in the order they are piped). ``streamproc``
re-exports :class:`TopologyTestDriver` too.
"""

from __future__ import annotations

from .engine.test_driver import TestInputTopic, TestOutputTopic, TopologyTestDriver

__all__ = ["TestInputTopic", "TestOutputTopic", "TopologyTestDriver"]
