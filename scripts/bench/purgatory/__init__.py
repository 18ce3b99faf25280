"""Helpers of scripts/bench/bench_purgatory.py (harness, old design, micro-benchmarks)."""
