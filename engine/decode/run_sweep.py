"""Sweep: measure acceptance and speed over a k x temperature grid (x node budgets x prompts x seeds).

`run_sweep` is a generator that yields after every run, so a caller can show
progress with a time-left estimate and cancel at any point keeping what is done.
Target-only baselines do not depend on k, so each (temperature, prompt, seed) is
decoded target-only once and shared by every k. The results' format (cells, JSON,
CSV) is engine.formats.sweep_format.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from engine.config import SpecConfig
from engine.decode.baseline import BaselineResult
from engine.decode.speculative import SpeculativeEngine
from engine.metrics import step_costs
from engine.formats.sweep_format import RunResult


@dataclass
class SweepProgress:
    """How far a sweep is: runs done of total, the time so far, the last result and every result."""

    done: int
    total: int
    elapsed_s: float
    last: RunResult | None
    results: list[RunResult] = field(default_factory=list)

    @property
    def eta_s(self) -> float | None:
        return self.elapsed_s / self.done * (self.total - self.done) if self.done else None


def run_sweep(engine: SpeculativeEngine, prompts: Sequence[str], ks: Sequence[int], temperatures: Sequence[float],
              seeds: Sequence[int], base: SpecConfig, tree_budgets: Sequence[int] = (0,)) -> Iterator[SweepProgress]:
    """Run every (temperature, prompt, seed, node budget, k) once; yield progress after each run.
    A node budget of 0 is a chain of k drafts, else a token tree of that many nodes, depth k."""
    runs = [(tree_nodes, k) for tree_nodes in tree_budgets for k in ks]
    total = len(runs) * len(temperatures) * len(prompts) * len(seeds)
    progress = SweepProgress(0, total, 0.0, None)
    started = time.perf_counter()
    for temperature in temperatures:
        for prompt_index, prompt in enumerate(prompts):
            for seed in seeds:
                baseline: BaselineResult | None = None
                for tree_nodes, k in runs:
                    config = base.replace(k=k, temperature=temperature, seed=seed, tree_nodes=tree_nodes)
                    trace = engine.generate(prompt, config)
                    if baseline is None:
                        baseline = engine.target_only(trace)
                    summary = trace.summary
                    costs = step_costs(trace.steps)
                    result = RunResult(
                        k=k, temperature=temperature, prompt_index=prompt_index, seed=seed,
                        acceptance_rate=summary.acceptance_rate, mean_accepted_length=summary.mean_accepted_length,
                        per_position_acceptance=summary.per_position_acceptance,
                        tokens_per_s=summary.tokens_per_s or 0.0, baseline_tokens_per_s=baseline.tokens_per_s,
                        target_forwards_per_token=summary.target_forwards / max(summary.new_tokens, 1),
                        wall_s=summary.wall_s, estimated_alpha=summary.estimated_alpha,
                        cost_ratio=summary.cost_ratio, identical=baseline.token_ids == trace.output.token_ids,
                        draft_ms=costs[0] if costs else None, verify_ms=costs[1] if costs else None,
                        target_token_ms=baseline.token_ms, tree_nodes=tree_nodes)
                    progress.results.append(result)
                    progress.done += 1
                    progress.last = result
                    progress.elapsed_s = time.perf_counter() - started
                    yield progress
