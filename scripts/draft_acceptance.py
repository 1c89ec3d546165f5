"""How often the target accepts each draft dtype's proposals: the default pair's draft quantized each way, one target.

bench.py's rows decode 32 tokens of five prompts (about 160 tokens a row), so a row's acceptance moves by a few
points from one configuration to another by chance alone (2026-11-29: the int4 row read 70 % greedy against the
int8 row's 75 %). This measures acceptance only, not speed, on more tokens: bench.py's five prompts, --tokens each,
greedy once and sampled over --seeds, every draft dtype against the same target in one process:

    python scripts/draft_acceptance.py --out benchmarks/data/draft-acceptance-DATE.json

The draft never changes the output (the target decides every token), so a dtype can only move acceptance; a gap
that stays at more tokens is the quantization's, one that closes was chance. Each row gives the accepted and
drafted counts and their ratio per temperature, and the JSON the machine, command and commit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.prompts import PROMPTS  # noqa: E402  (after the path: a script run from anywhere)
from engine import SpecConfig, SpeculativeEngine, load_pair  # noqa: E402
from engine.cli.machine import machine_record, provenance  # noqa: E402
from engine.config import DRAFT_DTYPES, NATIVE_BF16  # noqa: E402
from engine.presets import DEFAULT_PRESET  # noqa: E402


def acceptance(engine: SpeculativeEngine, temperature: float, seeds: list[int], k: int, tokens: int) -> dict:
    """Accepted and drafted tokens over every prompt and seed at `temperature`."""
    accepted = drafted = emitted = 0
    for seed in seeds:
        for prompt in PROMPTS.values():
            summary = engine.generate(prompt, SpecConfig(k=k, temperature=temperature, max_new_tokens=tokens,
                                                         seed=seed)).summary
            accepted, drafted, emitted = accepted + summary.accepted, drafted + summary.drafted, emitted + summary.new_tokens
    return {"temperature": temperature, "seeds": seeds, "accepted": accepted, "drafted": drafted,
            "tokens": emitted, "acceptance": round(accepted / drafted, 4) if drafted else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=DEFAULT_PRESET, help=f"the pair (default {DEFAULT_PRESET})")
    parser.add_argument("--drafts", default="int4,int8", help="comma-separated draft dtypes (default int4,int8)")
    parser.add_argument("--target-dtype", default=NATIVE_BF16, help=f"the target's dtype (default {NATIVE_BF16})")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=96, help="new tokens a prompt (bench.py: 32)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the sampled runs (T = 0.7)")
    parser.add_argument("--out", help="save the result as JSON here")
    args = parser.parse_args(argv)
    drafts = [name.strip() for name in args.drafts.split(",") if name.strip()]
    unknown = [name for name in drafts if name not in DRAFT_DTYPES]
    if unknown or not drafts:
        parser.error(f"--drafts takes draft dtypes from {', '.join(DRAFT_DTYPES)}, got {args.drafts!r}")
    results = {"what": "acceptance of the pair's draft in each dtype against one target, bench.py's prompts",
               "preset": args.preset,
               "cpu": machine_record(), **provenance(sys.argv[1:] if argv is None else argv), "k": args.k,
               "tokens_per_prompt": args.tokens, "prompts": list(PROMPTS), "rows": []}
    for draft_dtype in drafts:
        pair = load_pair(args.preset, draft_dtype=draft_dtype, target_dtype=args.target_dtype)
        engine = SpeculativeEngine(pair)
        row = {"draft_dtype": pair.draft_dtype, "target_dtype": pair.target_dtype,
               "temperatures": [acceptance(engine, 0.0, [0], args.k, args.tokens),
                                acceptance(engine, 0.7, list(range(args.seeds)), args.k, args.tokens)]}
        results["rows"].append(row)
        for measured in row["temperatures"]:
            print(f"{row['draft_dtype']} draft, {row['target_dtype']} target, T = {measured['temperature']:g}: "
                  f"{measured['acceptance']:.1%} accepted ({measured['accepted']} of {measured['drafted']} drafted, "
                  f"{measured['tokens']} tokens)", flush=True)
        del engine, pair
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
