"""Benchmarks (not tests): run from the repository root as ``python -m bench.<name>``; see docs/benchmarks.md."""
