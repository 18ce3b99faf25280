"""Conformance of streamproc with Kafka Streams itself (docs/semantics.md, "How the rules are checked").

Random scenarios run through Kafka Streams' own ``TopologyTestDriver`` (a small Java runner,
``java/streamproc/conformance/Runner.java``) and through streamproc's; any difference fails unless a
named classifier shows it is one of the documented deliberate differences. ``python -m
tests.conformance --n 2000`` is the long run; ``test_conformance.py`` the short one CI runs.
"""
