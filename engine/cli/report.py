"""Plain-text summary of a trace for the terminal (one screen)."""

from __future__ import annotations

from pathlib import Path

from engine.config import SpecConfig
from engine.formats.trace import Trace


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _shape(config: SpecConfig) -> str:
    """What each step drafts: a chain of k (adaptive or not) or a tree."""
    if config.is_tree:
        return f"token tree of up to {config.tree_nodes} nodes, branch {config.tree_branch}, depth k={config.k}"
    return f"k={config.k}{' adaptive' if config.adaptive_k else ''}"


def format_summary(trace: Trace, out_path: Path | None = None) -> str:
    config, summary = trace.config, trace.summary
    mode = "greedy" if config.is_greedy else f"temperature {config.temperature:g}, top-p {config.top_p:g}, top-k {config.top_k}"
    lines = [
        f"pair         {config.draft} -> {config.target} ({config.drafter} drafter, {config.device}, "
        f"draft {config.draft_dtype or '-'}, target {config.target_dtype}, {config.cache} KV cache)",
        f"settings     {_shape(config)}, {mode}, seed {config.seed}",
        f"tokens       {summary.new_tokens} new tokens in {summary.steps} steps "
        f"({summary.target_forwards} target forwards{', stopped at EOS' if trace.steps and trace.steps[-1].eos else ''})",
        f"acceptance   {_pct(summary.acceptance_rate)} of {summary.drafted} drafted tokens accepted",
        f"mean length  {_num(summary.mean_accepted_length)} tokens per step = per target forward "
        "(bonus/recovered token included)" + (f"; {summary.undrafted_steps} step(s) that drafted nothing left out"
                                              if summary.undrafted_steps else ""),
        "per position " + " ".join(_pct(value) for value in summary.per_position_acceptance)
        + (" (along each step's main line)" if config.is_tree else ""),
        f"speed        {_num(summary.tokens_per_s, 1)} tok/s over {summary.wall_s:.2f} s",
    ]
    if summary.mean_tree_nodes is not None:
        lines.insert(5, f"tree size    {summary.mean_tree_nodes:.1f} nodes verified per target forward (budget "
                        f"{config.tree_nodes}, up to {config.tree_branch} children per node, depth <= {config.k})")
    if summary.baseline is not None:
        baseline = summary.baseline
        lines += [f"baseline     target-only {baseline.tokens_per_s:.1f} tok/s; speedup {_num(summary.speedup)}x",
                  f"identical    {'yes' if baseline.identical else 'no'} (checked against the target-only run)"]
    lines.append(f"guarantee    {config.exactness.label}" + ("" if summary.baseline else " (--baseline checks it)"))
    if config.is_lab_mode:
        lines.append("lab mode     pieces of the engine are switched off")
    lines.append(f"output       {trace.output.text!r}")
    if out_path is not None:
        lines.append(f"trace        written to {out_path}")
    return "\n".join(lines)
