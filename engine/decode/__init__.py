"""The step loop and its parts: drafters, verification, KV bookkeeping, sampling, the recorder,
adaptive k, target-only baseline, the model pair, sweeps and the compute thread. Imports torch."""
