"""Benchmarks side by side with Apache ZooKeeper (``python -m trizk.compat.bench``)."""
