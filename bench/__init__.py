"""Benchmarks: `make bench` (python -m bench) writes bench/results/*.json and BENCHMARKS.md."""
