"""``dta lab bench``: the benchmarks (pipeline, stream, cards, model path, PostgreSQL) and
the flame graphs of ``python -m lab.bench.profile``."""
