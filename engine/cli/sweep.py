"""`python -m engine sweep`: the k x temperature grid from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from engine.cli.arguments import config_from_args, load_pair_from_args
from engine.cli.machine import describe_machine
from engine.config import MODEL_DRAFTER, ConfigError
from engine.formats.sweep_format import RunResult, aggregate, cells_to_csv, sweep_document


def parse_list(text: str, kind: type, name: str) -> list:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise ConfigError(f"--{name} is empty")
    return values


def read_prompts(path: Path | None) -> list[str]:
    """A JSON list of strings (or of {"prompt": ...}), or a text file with one prompt per line."""
    if path is None:
        path = Path(__file__).resolve().parents[2] / "assets" / "examples.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read prompts from {path}: {getattr(error, 'strerror', None) or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [line for line in text.splitlines() if line.strip()]
    prompts = [item.get("prompt") if isinstance(item, dict) else item for item in data] if isinstance(data, list) else []
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ConfigError(f"{path} holds no prompts (expected a JSON list of strings or one prompt per line)")
    return prompts


def write_sweep(out: Path, results: Sequence[RunResult], meta: dict[str, Any]) -> None:
    """STEM.json (every run and the cells) and STEM.csv (one row per k x temperature cell)."""
    try:
        out.with_suffix(".json").write_text(json.dumps(sweep_document(results, meta), indent=1), encoding="utf-8")
        out.with_suffix(".csv").write_text(cells_to_csv(aggregate(results)), encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot write {out}: {error.strerror}") from None


def command_sweep(args: argparse.Namespace) -> int:
    from engine.decode.run_sweep import run_sweep
    from engine.decode.speculative import SpeculativeEngine
    ks = parse_list(args.ks, int, "ks")
    temperatures = parse_list(args.temperatures, float, "temperatures")
    seeds = parse_list(args.seeds, int, "seeds")
    budgets = parse_list(args.tree_budgets, int, "tree-budgets") if args.tree_budgets else [args.tree_nodes]
    prompts = read_prompts(args.prompts)
    if not args.out.resolve().parent.is_dir():
        raise ConfigError(f"cannot write {args.out}: its folder does not exist")
    for k in ks:
        for temperature in temperatures:
            for tree_nodes in budgets:
                config_from_args(args, args.drafter or MODEL_DRAFTER).replace(k=k, temperature=temperature,
                                                                              tree_nodes=tree_nodes)
    pair = load_pair_from_args(args)
    base = config_from_args(args, args.drafter or pair.default_drafter)
    engine = SpeculativeEngine(pair)
    meta = {"preset": args.preset, "machine": describe_machine(), "draft": pair.draft_name, "target": pair.target_name, "prompts": prompts,
            "ks": ks, "temperatures": temperatures, "seeds": seeds, "tree_budgets": budgets, "max_new_tokens": base.max_new_tokens,
            "drafter": base.drafter, "draft_dtype": pair.draft_dtype, "target_dtype": pair.target_dtype}
    results = []
    try:
        for progress in run_sweep(engine, prompts, ks, temperatures, seeds, base, budgets):
            results = progress.results
            write_sweep(args.out, results, meta)      # after every run: a killed sweep keeps what it finished
            last = progress.last
            tree = f" tree {last.tree_nodes}" if last.tree_nodes else ""
            print(f"[{progress.done}/{progress.total}] k={last.k}{tree} T={last.temperature:g} prompt {last.prompt_index} "
                  f"seed {last.seed}: acceptance {last.acceptance_rate if last.acceptance_rate is not None else float('nan'):.2f}, "
                  f"{last.tokens_per_s:.1f} tok/s (target-only {last.baseline_tokens_per_s:.1f}); "
                  f"about {progress.eta_s:.0f} s left", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"cancelled: keeping {len(results)} finished runs", file=sys.stderr)
    write_sweep(args.out, results, meta)
    for cell in aggregate(results):
        tree = f" tree {cell.tree_nodes:2d}" if cell.tree_nodes else ""
        print(f"k={cell.k:2d}{tree} T={cell.temperature:4.2f}  acceptance {cell.acceptance_rate or 0:.2f}  "
              f"tokens/step {cell.mean_accepted_length or 0:.2f}  speedup {cell.speedup:.2f}x")
    print(f"wrote {args.out.with_suffix('.csv')} and {args.out.with_suffix('.json')}")
    return 0
