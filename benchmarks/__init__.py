"""Benchmarks of chainrecall: each module runs on its own (`python -m benchmarks.NAME`)."""
