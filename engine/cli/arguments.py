"""The options `run` and `sweep` share, and what they turn into: a SpecConfig and a loaded model pair.

engine.cli.main builds the parser from these; engine.cli.sweep uses them too, so
neither command module imports the other's.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.config import CACHE_CHOICES, CUTOFF_MODES, DEVICES, DRAFTERS, DRAFT_DTYPES, TARGET_DTYPES, SpecConfig
from engine.presets import DEFAULT_PRESET, PRESETS

if TYPE_CHECKING:
    from engine.decode.pair import ModelPair


class UsageError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                        help=f"model pair: {', '.join(sorted(PRESETS))} (default {DEFAULT_PRESET})")
    parser.add_argument("--draft", help="draft model: hub id, local directory or .gguf file (or 'ngram')")
    parser.add_argument("--target", help="target model: hub id, local directory or .gguf file")
    parser.add_argument("--device", choices=DEVICES, default="auto")
    parser.add_argument("--draft-dtype", choices=DRAFT_DTYPES, default="auto",
                        help="auto (default): int8 on a CPU, bfloat16 on CUDA; int4 (a CPU): 4-bit groups of 32, "
                             "half int8's bytes; the output never depends on it")
    parser.add_argument("--target-dtype", choices=TARGET_DTYPES, default="auto",
                        help="auto (default): bfloat16 on CUDA, float32 elsewhere (float32 decodes exactly as the "
                             "target alone does, up to rounding)")
    parser.add_argument("--cache", choices=CACHE_CHOICES, default="auto",
                        help="the KV cache: static (sized once, rolled back by a pointer; CUDA graphs on a GPU) or "
                             "dynamic (grows, cut rows freed); auto (default): static on CUDA, dynamic elsewhere")


def add_generation_options(parser: argparse.ArgumentParser) -> None:
    defaults = SpecConfig()
    parser.add_argument("--k", type=int, default=defaults.k, help="draft tokens per step (1-32); a tree's depth limit")
    parser.add_argument("--tree-nodes", type=int, default=defaults.tree_nodes, metavar="N",
                        help="draft a token tree of up to N nodes per step, verified in one target forward (0 = a chain)")
    parser.add_argument("--tree-branch", type=int, default=defaults.tree_branch, metavar="B",
                        help="a tree node's most children: the draft's B most probable next tokens")
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
                      draft_temperature=args.draft_temperature, tree_nodes=args.tree_nodes,
                      tree_branch=args.tree_branch, cache=args.cache)


def load_pair_from_args(args: argparse.Namespace) -> ModelPair:
    """Load the pair the options name; progress goes to stderr."""
    from transformers.utils import logging as transformers_logging

    from engine.loading.models import load_pair
    transformers_logging.set_verbosity_error()      # our own errors are the clear ones
    transformers_logging.disable_progress_bar()     # our progress lines say what is loading
    if args.preset and (args.draft or args.target):
        raise UsageError("give either --preset or --draft/--target, not both")
    if (args.draft is None) != (args.target is None) and not args.preset:
        raise UsageError("custom models need both --draft and --target (use --draft ngram for prompt lookup)")
    return load_pair(args.preset, draft=args.draft, target=args.target, device=args.device,
                     draft_dtype=args.draft_dtype, target_dtype=args.target_dtype,
                     progress=lambda fraction, message: print(f"[{fraction:4.0%}] {message}", file=sys.stderr))
