"""The benchmarks, one module each, run from the repository root as ``python -m benchmarks.<name>``.

The Kafka benchmarks (``bench_daemon``, ``bench_join_backlog``, ``bench_wordcount``,
``bench_restore``, ``bench_peers``) share :mod:`benchmarks.harness`: the broker, topics, input, the
aiokafka passthrough baseline, the daemon timed in-process and a phase measured in its own process.
``benchmarks.peers`` holds the peer comparison's parts, ``benchmarks.purgatory`` the purgatory
workloads. Each module's docstring says what it measures and prints; ``--quick`` is the small run.
"""
