"""Parts of ``benchmarks.bench_purgatory``: the TestPurgatoryPerformance port (``performance``), the old design, the micro-benchmarks."""
