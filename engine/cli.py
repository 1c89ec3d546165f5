"""Command line: `python -m engine run` generates one trace, `python -m engine sweep`
runs a k x temperature grid. Every bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from engine.config import DRAFT_DTYPES, DRAFTERS, DTYPES, DEVICES, CUTOFF_MODES, ConfigError, SpecConfig
from engine.presets import DEFAULT_PRESET, PRESETS
from engine.report import format_summary
from engine.sweep_cli import command_sweep

EXIT_USAGE = 2


class UsageError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


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
    sweep.add_argument("--out", type=Path, default=Path("sweep"), help="output path stem: writes STEM.csv and STEM.json")
    sweep.set_defaults(handler=command_sweep)
    return parser


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                        help=f"model pair: {', '.join(sorted(PRESETS))} (default {DEFAULT_PRESET})")
    parser.add_argument("--draft", help="draft model: hub id, local directory or .gguf file (or 'ngram')")
    parser.add_argument("--target", help="target model: hub id, local directory or .gguf file")
    parser.add_argument("--device", choices=DEVICES, default="auto")
    parser.add_argument("--draft-dtype", choices=DRAFT_DTYPES, default="auto",
                        help="auto (default): int8 on a CPU, bfloat16 on CUDA; the output never depends on it")
    parser.add_argument("--target-dtype", choices=DTYPES, default="float32")


def add_generation_options(parser: argparse.ArgumentParser) -> None:
    defaults = SpecConfig()
    parser.add_argument("--k", type=int, default=defaults.k, help="draft tokens per step (1-32)")
    parser.add_argument("--adaptive-k", action="store_true", help="choose each step's k in [1, 2k] from measured acceptance and costs")
    parser.add_argument("--confidence-threshold", type=float, default=0.0,
                        help="stop drafting when the draft's probability falls below this")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=defaults.top_p)
    parser.add_argument("--top-k", type=int, default=defaults.top_k)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--drafter", choices=DRAFTERS, help="model or ngram (default: the preset's)")
    parser.add_argument("--ngram-min", type=int, default=defaults.ngram_min)
    parser.add_argument("--ngram-max", type=int, default=defaults.ngram_max)
    parser.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    lab = parser.add_argument_group("lab mode (switch off a piece of the engine)")
    lab.add_argument("--no-carryover", action="store_true", help="do not feed d_k + bonus to the draft (skip problem B)")
    lab.add_argument("--cutoff-mode", choices=CUTOFF_MODES, default="truncate", help="none skips problem D; zero_fill is problem C's answer")
    lab.add_argument("--draft-temperature", type=float, default=-1.0, help="draft samples at this temperature, target verifies greedily")


def config_from_args(args: argparse.Namespace, drafter: str) -> SpecConfig:
    return SpecConfig(k=args.k, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                      max_new_tokens=args.max_new_tokens, seed=args.seed, drafter=drafter,
                      adaptive_k=args.adaptive_k, confidence_threshold=args.confidence_threshold,
                      ngram_min=args.ngram_min, ngram_max=args.ngram_max, raw=args.raw,
                      carryover=not args.no_carryover, cutoff_mode=args.cutoff_mode,
                      draft_temperature=args.draft_temperature)


def load_pair_from_args(args: argparse.Namespace):
    """Load the pair the options name; progress goes to stderr."""
    from transformers.utils import logging as transformers_logging

    from engine.models import load_pair
    transformers_logging.set_verbosity_error()      # our own errors are the clear ones
    transformers_logging.disable_progress_bar()     # our progress lines say what is loading
    if args.preset and (args.draft or args.target):
        raise UsageError("give either --preset or --draft/--target, not both")
    if (args.draft is None) != (args.target is None) and not args.preset:
        raise UsageError("custom models need both --draft and --target (use --draft ngram for prompt lookup)")
    return load_pair(args.preset, draft=args.draft, target=args.target, device=args.device,
                     draft_dtype=args.draft_dtype, target_dtype=args.target_dtype,
                     progress=lambda fraction, message: print(f"[{fraction:4.0%}] {message}", file=sys.stderr))


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
    from engine.engine import SpeculativeEngine
    prompt = read_prompt(args)
    if not prompt.strip():
        raise UsageError("the prompt is empty: type some text to continue")
    if args.out is not None and not args.out.resolve().parent.is_dir():
        raise UsageError(f"cannot write {args.out}: its folder does not exist")
    config_from_args(args, args.drafter or "model")       # validate numbers before loading models
    pair = load_pair_from_args(args)
    config = config_from_args(args, args.drafter or pair.default_drafter)
    engine = SpeculativeEngine(pair)
    generation = engine.start(prompt, config)
    while not generation.is_done:
        step = generation.step()
        if args.show_steps:
            print(f"step {step.index:3d}: k={step.k} accepted={step.num_accepted} "
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
