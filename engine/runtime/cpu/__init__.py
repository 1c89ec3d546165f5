"""The CPU's fast linear layers: oneDNN-prepacked weights for the target's verify, an int8 draft,
each behind a probe with the stock kernel as fallback (docs/benchmark.md: each CPU class's rows)."""
