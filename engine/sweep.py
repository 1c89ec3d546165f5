"""Sweep: measure acceptance and speed over a k x temperature grid (x prompts x seeds).

`run_sweep` is a generator that yields after every run, so a caller can show
progress with a time-left estimate and cancel at any point keeping what is done.
Target-only baselines do not depend on k, so each (temperature, prompt, seed) is
decoded target-only once and shared by every k.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator, Sequence

from engine.baseline import BaselineResult
from engine.config import SpecConfig
from engine.engine import SpeculativeEngine
from engine.metrics import expected_speedup, expected_tokens_per_step

SWEEP_SCHEMA = "specviz.sweep/1"


@dataclass(frozen=True)
class RunResult:
    k: int
    temperature: float
    prompt_index: int
    seed: int
    acceptance_rate: float | None
    mean_accepted_length: float | None
    per_position_acceptance: tuple[float | None, ...]
    tokens_per_s: float
    baseline_tokens_per_s: float
    target_forwards_per_token: float
    wall_s: float
    estimated_alpha: float | None
    cost_ratio: float | None
    identical: bool


@dataclass(frozen=True)
class Cell:
    """Mean over prompts and seeds of the runs at one (k, temperature)."""

    k: int
    temperature: float
    runs: int
    acceptance_rate: float | None
    mean_accepted_length: float | None
    per_position_acceptance: tuple[float | None, ...]
    tokens_per_s: float
    baseline_tokens_per_s: float
    speedup: float
    target_forwards_per_token: float
    wall_s: float
    estimated_alpha: float | None
    cost_ratio: float | None
    predicted_tokens_per_step: float | None
    predicted_speedup: float | None


@dataclass
class SweepProgress:
    done: int
    total: int
    elapsed_s: float
    last: RunResult | None
    results: list[RunResult] = field(default_factory=list)

    @property
    def eta_s(self) -> float | None:
        return self.elapsed_s / self.done * (self.total - self.done) if self.done else None


def run_sweep(engine: SpeculativeEngine, prompts: Sequence[str], ks: Sequence[int], temperatures: Sequence[float],
              seeds: Sequence[int], base: SpecConfig) -> Iterator[SweepProgress]:
    """Run every (temperature, prompt, seed, k) once; yield progress after each run."""
    total = len(ks) * len(temperatures) * len(prompts) * len(seeds)
    progress = SweepProgress(0, total, 0.0, None)
    started = time.perf_counter()
    for temperature in temperatures:
        for prompt_index, prompt in enumerate(prompts):
            for seed in seeds:
                baseline: BaselineResult | None = None
                for k in ks:
                    config = base.replace(k=k, temperature=temperature, seed=seed)
                    trace = engine.generate(prompt, config)
                    if baseline is None:
                        baseline = engine.target_only(trace)
                    summary = trace.summary
                    result = RunResult(
                        k=k, temperature=temperature, prompt_index=prompt_index, seed=seed,
                        acceptance_rate=summary.acceptance_rate, mean_accepted_length=summary.mean_accepted_length,
                        per_position_acceptance=summary.per_position_acceptance,
                        tokens_per_s=summary.tokens_per_s or 0.0, baseline_tokens_per_s=baseline.tokens_per_s,
                        target_forwards_per_token=summary.target_forwards / max(summary.new_tokens, 1),
                        wall_s=summary.wall_s, estimated_alpha=summary.estimated_alpha,
                        cost_ratio=summary.cost_ratio, identical=baseline.token_ids == trace.output.token_ids)
                    progress.results.append(result)
                    progress.done += 1
                    progress.last = result
                    progress.elapsed_s = time.perf_counter() - started
                    yield progress


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def aggregate(results: Sequence[RunResult]) -> list[Cell]:
    """One Cell per (k, temperature) present in results, sorted by temperature then k."""
    groups: dict[tuple[float, int], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.temperature, result.k), []).append(result)
    cells = []
    for (temperature, k), runs in sorted(groups.items()):
        width = max(len(r.per_position_acceptance) for r in runs)
        positions = tuple(_mean([r.per_position_acceptance[i] if i < len(r.per_position_acceptance) else None
                                 for r in runs]) for i in range(width))
        tokens_per_s = statistics.fmean(r.tokens_per_s for r in runs)
        baseline_tokens_per_s = statistics.fmean(r.baseline_tokens_per_s for r in runs)
        alpha, cost = _mean([r.estimated_alpha for r in runs]), _mean([r.cost_ratio for r in runs])
        cells.append(Cell(
            k=k, temperature=temperature, runs=len(runs),
            acceptance_rate=_mean([r.acceptance_rate for r in runs]),
            mean_accepted_length=_mean([r.mean_accepted_length for r in runs]),
            per_position_acceptance=positions, tokens_per_s=tokens_per_s,
            baseline_tokens_per_s=baseline_tokens_per_s,
            speedup=tokens_per_s / baseline_tokens_per_s if baseline_tokens_per_s else 0.0,
            target_forwards_per_token=statistics.fmean(r.target_forwards_per_token for r in runs),
            wall_s=sum(r.wall_s for r in runs), estimated_alpha=alpha, cost_ratio=cost,
            predicted_tokens_per_step=expected_tokens_per_step(alpha, k) if alpha is not None else None,
            predicted_speedup=expected_speedup(alpha, k, cost) if alpha is not None and cost is not None else None))
    return cells


def sweep_to_json(results: Sequence[RunResult], meta: dict) -> str:
    return json.dumps({"schema": SWEEP_SCHEMA, "meta": meta,
                       "cells": [asdict(cell) for cell in aggregate(results)],
                       "runs": [asdict(result) for result in results]}, indent=1)


def cells_to_csv(cells: Sequence[Cell]) -> str:
    buffer = io.StringIO()
    names = [name for name in Cell.__dataclass_fields__]
    writer = csv.writer(buffer)
    writer.writerow(names)
    for cell in cells:
        row = asdict(cell)
        row["per_position_acceptance"] = " ".join("" if v is None else f"{v:.4f}" for v in cell.per_position_acceptance)
        writer.writerow(row[name] for name in names)
    return buffer.getvalue()
