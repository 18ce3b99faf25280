"""Helpers shared by the tests, one module per subject (import them as ``tests.support.<module>``).

* :mod:`tests.support.kafka`: admin, topics, produce/consume, starting a local broker in pytest.
* :mod:`tests.support.kafka_fixtures`: the pytest plugin with the Kafka fixtures
  (``kafka_bootstrap``, ``topic_factory``, ``kafka_cluster``, ``cluster_topic_factory``), loaded by
  ``tests/conftest.py``.
* :mod:`tests.support.daemon`: running the daemon in a test, its expected output, offsets, reading outputs.
* :mod:`tests.support.durability`: the fault harness, changelog reads, restored tasks, store contents.
* :mod:`tests.support.dsl`: session and join topologies for the DSL property tests.
* :mod:`tests.support.spark`: generated inputs and reference runs for Spark reprocessing (also
  used by ``benchmarks.bench_spark``).
"""
