"""Benchmarks (run as `grm bench NAME` or `python bench/NAME.py`); `bench.lib` holds the research
and evaluation code only they and the tests use, kept out of the installed package."""
