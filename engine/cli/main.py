"""Command line: `python -m engine run` generates one trace, `python -m engine sweep`
runs a k x temperature grid, `python -m engine load` a concurrency grid on vLLM servers
(engine/cli/load.py). Every bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from engine.cli.arguments import (UsageError, add_generation_options, add_model_options, config_from_args,
                                  load_pair_from_args)
from engine.cli.load import add_load_parser, command_load
from engine.cli.report import format_summary
from engine.cli.sweep import command_sweep
from engine.config import MODEL_DRAFTER, ConfigError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:      # one line instead of usage + message
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m engine", description="SpecViz speculative decoding engine")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="generate once and write a trace")
    add_model_options(run)
    add_generation_options(run)
    run.add_argument("--prompt", help="prompt text (or use --prompt-file)")
    run.add_argument("--prompt-file", type=Path, help="read the prompt from this file")
    run.add_argument("--baseline", action="store_true", help="also run target-only decoding: speedup and identity")
    run.add_argument("--out", type=Path, help="write the trace JSON here")
    run.add_argument("--show-steps", action="store_true", help="print one line per step")
    run.set_defaults(handler=command_run)
    sweep = commands.add_parser("sweep", help="run a k x temperature grid and write CSV/JSON")
    add_model_options(sweep)
    add_generation_options(sweep)
    sweep.add_argument("--ks", default="1,2,3,4,6,8", help="comma-separated draft lengths")
    sweep.add_argument("--temperatures", default="0,0.3,0.7,1.0", help="comma-separated temperatures")
    sweep.add_argument("--prompts", type=Path, help="JSON list of prompts or text file with one per line "
                       "(default: the bundled example prompts)")
    sweep.add_argument("--seeds", default="0", help="comma-separated seeds")
    sweep.add_argument("--tree-budgets", default="", metavar="LIST",
                       help="comma-separated token-tree node budgets, 0 = a chain (default: --tree-nodes)")
    sweep.add_argument("--out", type=Path, default=Path("sweep"), help="output path stem: writes STEM.csv and STEM.json")
    sweep.set_defaults(handler=command_sweep)
    add_load_parser(commands, command_load)
    return parser


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt_file is not None:
        try:
            return args.prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"cannot read prompt file {args.prompt_file}: {error.strerror or error}") from None
    if args.prompt is None:
        raise UsageError("give a prompt with --prompt TEXT or --prompt-file PATH")
    return args.prompt


def command_run(args: argparse.Namespace) -> int:
    from engine.decode.speculative import SpeculativeEngine
    prompt = read_prompt(args)
    if not prompt.strip():
        raise UsageError("the prompt is empty: type some text to continue")
    if args.out is not None and not args.out.resolve().parent.is_dir():
        raise UsageError(f"cannot write {args.out}: its folder does not exist")
    config_from_args(args, args.drafter or MODEL_DRAFTER)       # validate numbers before loading models
    pair = load_pair_from_args(args)
    config = config_from_args(args, args.drafter or pair.default_drafter)
    engine = SpeculativeEngine(pair)
    generation = engine.start(prompt, config)
    while not generation.is_done:
        step = generation.step()
        if args.show_steps:
            tree = f" tree={len(step.tree.nodes)} nodes" if step.tree is not None else ""
            print(f"step {step.index:3d}: k={step.k}{tree} accepted={step.num_accepted} "
                  f"emitted={''.join(t.text for t in step.emitted)!r}", file=sys.stderr)
    trace = generation.trace()
    if args.baseline:
        trace = engine.with_baseline(trace)
    if args.out is not None:
        try:
            trace.save(args.out)
        except OSError as error:
            raise UsageError(f"cannot write {args.out}: {error.strerror}") from None
    print(format_summary(trace, args.out))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except (UsageError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:        # ModelLoadError and prompt problems are ValueErrors with one-line messages
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
