"""Hand-built `specviz.sweep/1` documents for UI tests: no model, no torch.

`make_sweep(ks=(1, 2, 4), temperatures=(0.0, 0.7))` gives one cell per (k, T) whose
speedup, acceptance and a follow simple formulas of k and T (overridable), shaped like
engine.formats.sweep_format.sweep_document's output.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.metrics import expected_speedup, expected_tokens_per_step


def default_speedup(k: int, temperature: float) -> float:
    """Peaks at k = 3 when greedy, at k = 1 when sampling hot."""
    best = 3 if temperature < 0.5 else 1
    return 1.6 - 0.1 * abs(k - best) - 0.4 * temperature


def make_cell(k: int, temperature: float, alpha: float, cost_ratio: float | None, speedup: float,
              runs: int = 2) -> dict:
    tokens_per_step = expected_tokens_per_step(alpha, k)
    return {
        "k": k, "temperature": temperature, "runs": runs, "acceptance_rate": alpha * 0.95,
        "mean_accepted_length": tokens_per_step * 0.97, "per_position_acceptance": [alpha ** (i / 4) * alpha
                                                                                    for i in range(k)],
        "tokens_per_s": 5.0 * speedup, "baseline_tokens_per_s": 5.0, "speedup": speedup,
        "target_forwards_per_token": 1.0 / tokens_per_step, "wall_s": 3.0 * runs, "estimated_alpha": alpha,
        "cost_ratio": cost_ratio, "predicted_tokens_per_step": tokens_per_step,
        "predicted_speedup": None if cost_ratio is None else expected_speedup(alpha, k, cost_ratio),
    }


def make_sweep(ks: Sequence[int] = (1, 2, 3, 4, 6, 8), temperatures: Sequence[float] = (0.0, 0.3, 0.7, 1.0),
               alpha: Callable[[float], float] = lambda t: 0.8 - 0.2 * t, cost_ratio: float | None = 0.2,
               speedup: Callable[[int, float], float] = default_speedup, skip: Sequence[tuple[int, float]] = (),
               prompts: Sequence[str] = ("def fib(n):", "Count to ten.")) -> dict:
    """A sweep document; `skip` leaves (k, T) cells out, as a stopped sweep would."""
    cells = [make_cell(k, t, alpha(t), cost_ratio, speedup(k, t)) for t in temperatures for k in ks
             if (k, t) not in skip]
    meta = {"preset": "tiny-random", "draft": "tiny-random/draft", "target": "tiny-random/target",
            "prompts": list(prompts), "ks": list(ks), "temperatures": list(temperatures), "seeds": [0],
            "max_new_tokens": 32, "drafter": "model", "draft_dtype": "float32", "target_dtype": "float32"}
    return {"schema": "specviz.sweep/1", "meta": meta, "cells": cells, "runs": []}
