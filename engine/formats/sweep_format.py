"""The sweep format (`specviz.sweep/1`): one run, one k x temperature (x node budget) cell, the document and its CSV.

Torch-free, so the UI and the command line share it: the runner
(engine.decode.run_sweep) yields `RunResult`s, `aggregate` averages them into
`SweepCell`s, `sweep_document` is the JSON document (callers `json.dumps(...,
indent=1)` it) and `cells_to_csv` the CSV, one row per cell. engine.formats.sweep_reader
reads a document back, strictly.
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

from engine.metrics import expected_speedup, expected_tokens_per_step

SWEEP_SCHEMA = "specviz.sweep/1"
MAX_SWEEP_BYTES = 20 * 1024 * 1024


class SweepFormatError(ValueError):
    """The data is not a valid specviz.sweep/1 document; the message says where."""


@dataclass(frozen=True)
class RunResult:
    """One decode at one (k, temperature, prompt, seed), with its target-only baseline."""

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
    tree_nodes: int = 0                         # the node budget (0 = a chain): docs/architecture.md §2
    draft_ms: float | None = None               # one drafted token (steps after the first)
    verify_ms: float | None = None              # one verify forward of the step's k + 1 tokens
    target_token_ms: float | None = None        # one target-only decoding forward (its prefill left out)


@dataclass(frozen=True)
class SweepCell:
    """Means over prompts and seeds of the runs at one (k, temperature)."""

    k: int
    temperature: float
    runs: int
    acceptance_rate: float | None
    mean_accepted_length: float | None          # tokens emitted per step (target forward), bonus included
    per_position_acceptance: tuple[float | None, ...]
    tokens_per_s: float
    baseline_tokens_per_s: float
    speedup: float
    target_forwards_per_token: float
    wall_s: float
    estimated_alpha: float | None               # mean over draft positions of sum_x min(p(x), q(x))
    cost_ratio: float | None                    # draft time per drafted token / verify time per step
    predicted_tokens_per_step: float | None
    predicted_speedup: float | None
    tree_nodes: int = 0                         # the node budget (0 = a chain); the i.i.d. model is a chain's
    # In units of one target-only decoding forward (None in sweeps recorded before they were):
    draft_cost: float | None = None             # one drafted token
    verify_cost: float | None = None            # the verify forward of k + 1 tokens (1 in Leviathan et al.'s model)


def aggregate(results: Sequence[RunResult]) -> list[SweepCell]:
    """One SweepCell per (k, temperature, tree_nodes) present in results, sorted by temperature,
    node budget, then k."""
    groups: dict[tuple[float, int, int], list[RunResult]] = {}
    for result in results:
        groups.setdefault((result.temperature, result.tree_nodes, result.k), []).append(result)
    cells = []
    for (temperature, tree_nodes, k), runs in sorted(groups.items()):
        width = max(len(r.per_position_acceptance) for r in runs)
        positions = tuple(_mean([r.per_position_acceptance[i] if i < len(r.per_position_acceptance) else None
                                 for r in runs]) for i in range(width))
        tokens_per_s = statistics.fmean(r.tokens_per_s for r in runs)
        baseline_tokens_per_s = statistics.fmean(r.baseline_tokens_per_s for r in runs)
        alpha, cost = _mean([r.estimated_alpha for r in runs]), _mean([r.cost_ratio for r in runs])
        cells.append(SweepCell(
            k=k, temperature=temperature, runs=len(runs),
            acceptance_rate=_mean([r.acceptance_rate for r in runs]),
            mean_accepted_length=_mean([r.mean_accepted_length for r in runs]),
            per_position_acceptance=positions, tokens_per_s=tokens_per_s,
            baseline_tokens_per_s=baseline_tokens_per_s,
            speedup=tokens_per_s / baseline_tokens_per_s if baseline_tokens_per_s else 0.0,
            target_forwards_per_token=statistics.fmean(r.target_forwards_per_token for r in runs),
            wall_s=sum(r.wall_s for r in runs), estimated_alpha=alpha, cost_ratio=cost,
            predicted_tokens_per_step=expected_tokens_per_step(alpha, k) if alpha is not None else None,
            predicted_speedup=expected_speedup(alpha, k, cost) if alpha is not None and cost is not None else None,
            draft_cost=_mean([ratio(r.draft_ms, r.target_token_ms) for r in runs]),
            verify_cost=_mean([ratio(r.verify_ms, r.target_token_ms) for r in runs]), tree_nodes=tree_nodes))
    return cells


def sweep_document(results: Sequence[RunResult], meta: dict[str, Any]) -> dict[str, Any]:
    """The specviz.sweep/1 document of `results`: meta, their cells and every run, in JSON types only."""
    return {"schema": SWEEP_SCHEMA, "meta": meta,
            "cells": [_json_row(cell) for cell in aggregate(results)],
            "runs": [_json_row(result) for result in results]}


def cells_to_csv(cells: Sequence[SweepCell]) -> str:
    """One row per cell, a column per SweepCell field; per-position acceptances space-separated."""
    buffer = io.StringIO()
    names = [field.name for field in fields(SweepCell)]
    writer = csv.writer(buffer)
    writer.writerow(names)
    for cell in cells:
        row = asdict(cell)
        row["per_position_acceptance"] = " ".join("" if v is None else f"{v:.4f}" for v in cell.per_position_acceptance)
        writer.writerow(row[name] for name in names)
    return buffer.getvalue()


def _json_row(row: RunResult | SweepCell) -> dict[str, Any]:
    values = asdict(row)
    values["per_position_acceptance"] = list(row.per_position_acceptance)
    return values


def ratio(part: float | None, whole: float | None) -> float | None:
    """part / whole, or None when either is missing (or the whole is 0)."""
    return part / whole if part is not None and whole else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None
