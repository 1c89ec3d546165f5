"""Record a race (engine/formats/race.py) with real models and save it as JSON, e.g. the Race tab's
bundled one: `.venv/bin/python scripts/record_race.py --out assets/races/qwen-coder.json`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import SpecConfig, load_pair  # noqa: E402
from engine.decode.race_run import run_race  # noqa: E402

PROMPT = "Write a Python function that checks whether a string is a palindrome."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record a target-only vs speculative race to JSON.")
    parser.add_argument("--preset", default="qwen-coder")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    pair = load_pair(preset=args.preset, draft_dtype="auto",            # what the app loads
                     progress=lambda fraction, message: print(f"{fraction:4.0%} {message}"))
    for update in run_race(pair, args.prompt, SpecConfig(k=args.k, max_new_tokens=args.max_new_tokens)):
        if update.race is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            update.race.save(args.out)
            slow, fast = update.race.target_only, update.race.speculative
            print(f"target-only {slow.wall_s:.2f} s, speculative {fast.wall_s:.2f} s, "
                  f"{update.race.speedup:.2f}x tokens/s, identical: {update.race.identical} -> {args.out}")


if __name__ == "__main__":
    main()
