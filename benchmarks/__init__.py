"""bench.py's parts: the configurations measured, how each is run and timed, the table, the
startup measurement (warm load time, peak memory) and the figure (docs/benchmark.md)."""
