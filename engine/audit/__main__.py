"""`python -m engine.audit FILE`: which tokens of a run the target would (almost) never emit.

    python -m engine.audit vllm-emitted.json                  # the default preset's target, float32
    python -m engine.audit run.json --preset tiny-random --all
    python -m engine.audit vllm-run.json --write audited.json    # the trace with its audit, for the page to draw

FILE is a SpecViz trace or an emitted-tokens document (engine/audit/runs.py; bench.py's vLLM
rows save one). The target is loaded in float32 on stock kernels (no draft), each run is scored
at its own temperature (engine/audit/score.py) and the marked steps are printed; the exit
status is 0 either way (an audit reports, it does not judge), 2 on bad input. With --write OUT, FILE must be a trace:
OUT is that trace with the audit saved in it (engine/formats/trace_audit.py), which the Run tab draws as marks.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter

from engine.audit.marks import RARE, marked_lines, token_kinds, trace_audit
from engine.audit.runs import read_runs
from engine.formats.trace import Trace, TraceFormatError
from engine.presets import DEFAULT_PRESET, PRESETS, ModelLoadError


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m engine.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="a SpecViz trace or an emitted-tokens document (specviz.emitted/1)")
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="the pair whose target scores the tokens")
    parser.add_argument("--target", default="", help="a model folder or reference in place of the preset's target")
    parser.add_argument("--threshold", type=float, default=RARE, help="mark tokens the target gives less than this")
    parser.add_argument("--all", action="store_true", help="print every token's score, not only the marked ones")
    parser.add_argument("--write", default="", metavar="OUT", help="FILE being a trace: save it with its audit to OUT")
    args = parser.parse_args(argv)
    if not 0 < args.threshold < 1:
        parser.error(f"--threshold must be between 0 and 1, got {args.threshold:g}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        runs = read_runs(args.file)
        trace = Trace.load(args.file) if args.write else None       # --write: FILE must be a trace
    except (OSError, TraceFormatError) as error:
        print(f"error: {args.file}: {error}" + (" (--write takes a trace)" if args.write else ""), file=sys.stderr)
        return 2
    from engine.audit.score import score_tokens, steps_of        # torch: only once the file is known good
    from engine.loading.models import load_pair
    try:
        pair = load_pair(args.preset, target=args.target or None, draft="ngram", device="cpu",
                         target_dtype="float32", prepack=False)
    except ModelLoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    marked, tokens, expected, by_kind = 0, 0, 0.0, Counter()
    for run in runs:
        try:
            kinds = (token_kinds(run.step_sizes, run.step_drafted)
                     if run.step_sizes is not None and run.step_drafted is not None else None)
            audit = score_tokens(pair, run.prompt_ids, run.token_ids, run.temperature, run.top_k, run.top_p,
                                 None if run.step_sizes is None else steps_of(run.step_sizes), args.threshold, kinds)
        except ValueError as error:
            print(f"error: {run.name}: {error}", file=sys.stderr)
            return 2
        print(f"{run.name} ({run.engine}): {audit.summary()}")
        if trace is not None:
            scored_by = f"{args.target or PRESETS[args.preset].target} (SpecViz, float32, stock kernels)"
            dataclasses.replace(trace, audit=trace_audit(audit, scored_by)).save(args.write)
            print(f"  saved with its audit: {args.write}")
        marked, tokens, expected = marked + len(audit.marked), tokens + len(audit.scores), expected + audit.expected_marked
        by_kind.update(audit.marked_by_kind())
        for line in marked_lines(audit):
            print("  " + line)
        if args.all:
            for score in audit.scores:
                print(f"    {score.position:4d} step {score.step} {score.kind or ''}: {score.text!r} "
                      f"p = {score.probability:.3g}")
    if len(runs) > 1:
        kinds = "".join(f", {count} {kind}" for kind, count in by_kind.most_common())
        print(f"All {len(runs)} runs: {marked} of {tokens} tokens marked{kinds}; sampling from the target itself "
              f"would mark {expected:.2g} on average.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
