"""bench.py: SpecViz's engine against target-only decoding and transformers' assisted
generation, in one process on one machine (docs/benchmark.md).

    python bench.py [--preset qwen-coder] [--quick] [--repeats 3] [--max-new-tokens 64]

Every configuration runs every prompt `--repeats` times; the median wall time per
(configuration, prompt) is kept and tokens/s are summed over prompts. Ratios, not
absolute times, are the figures of merit. Writes bench-results.json and prints a
markdown table. `--quick` uses tiny-random, for a quick check (docs/benchmark.md).

Three pairs load once: the plain float32 pair (what transformers' generate() gets,
and the reference for every speedup: target-only decoding on the plain float32
target), the same with a bfloat16 draft, and SpecViz's fast pair (int8 draft,
oneDNN-prepacked float32 target, engine/loading/cpu_kernels.py) at several k and with
adaptive k. A fourth pairs the plain float32 draft with the fast pair's prepacked
target: what `load_pair(draft_dtype="float32")` gives, at the dtypes of the
transformers rows. Theory: E(a, k) / (k c + 1) with a the mean per-position overlap
sum_x min(p, q), k the mean draft length and c = draft ms per token / target-only
ms per token; "verify cost" v is a verify forward over one target-only step, and
"theory at v" is E(a, k) / (k c + v), what the measured verify cost allows: measured
over it is the engine's own overhead (sampling, cache cutoff, recording).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from engine.config import NGRAM_DRAFTER, SpecConfig
from engine.decode.adaptive import DrafterCosts
from engine.decode.pair import ModelPair
from engine.decode.speculative import SpeculativeEngine
from engine.loading.models import load_pair
from engine.metrics import expected_speedup, expected_tokens_per_step

PROMPTS = {
    "code": "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "explanation": "Explain in a short paragraph how a hash map handles collisions.",
    "summary": "Summarize in two sentences: The mitochondrion is an organelle found in most eukaryotic cells. "
               "It generates most of the cell's supply of ATP, used as a source of chemical energy, and it is "
               "involved in signaling, cell differentiation and cell death.",
    "repetition": "List the numbers from 1 to 40 separated by commas.",
    "chat": "Hi! Can you suggest three names for a small orange cat?",
}


@dataclass
class Row:
    name: str
    temperature: float
    tokens: int = 0
    wall_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    alpha: list[float] = field(default_factory=list)
    draft_ms: float = 0.0                 # summed over steps, for the cost ratio c
    verify_ms: float = 0.0
    k: int = 0
    identical: bool | None = None
    per_prompt: dict[str, tuple[int, float]] = field(default_factory=dict)   # name -> (tokens, wall_s)

    def add(self, name: str, tokens: int, wall_s: float) -> None:
        self.tokens += tokens
        self.wall_s += wall_s
        self.per_prompt[name] = (tokens, wall_s)

    def prompt_tokens_per_s(self, name: str) -> float:
        tokens, wall = self.per_prompt.get(name, (0, 0.0))
        return tokens / wall if wall else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


def timed(run: Callable[[], object], repeats: int) -> tuple[object, float]:
    """The last result and the median wall time of `repeats` runs."""
    results, times = None, []
    for _ in range(repeats):
        started = time.perf_counter()
        results = run()
        times.append(time.perf_counter() - started)
    return results, statistics.median(times)


def hf_generate(pair: ModelPair, prompt_ids: list[int], config: SpecConfig, assisted: str | None) -> list[int]:
    """transformers' generate(): target-only, or assisted at the same k ("same-k") or its defaults."""
    input_ids = torch.tensor([prompt_ids], device=pair.device)
    kwargs = dict(max_new_tokens=config.max_new_tokens, attention_mask=torch.ones_like(input_ids),
                  pad_token_id=pair.tokenizer.pad_token_id or sorted(pair.eos_token_ids)[0],
                  eos_token_id=sorted(pair.eos_token_ids))
    kwargs.update(dict(do_sample=True, temperature=config.temperature, top_p=1.0, top_k=0)
                  if config.temperature > 0 else dict(do_sample=False))
    if assisted == "same-k":
        kwargs.update(assistant_model=pair.draft, num_assistant_tokens=config.k,
                      num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
    elif assisted == "defaults":
        kwargs.update(assistant_model=pair.draft)
    with torch.inference_mode():
        output = pair.target.generate(input_ids, **kwargs)
    return output[0, len(prompt_ids):].tolist()


def bench_engine(row: Row, engine: SpeculativeEngine, config: SpecConfig, repeats: int,
                 reference: dict[str, tuple[int, ...]] | None) -> None:
    identical = True
    for name, prompt in PROMPTS.items():
        trace, wall = timed(lambda: engine.generate(prompt, config), repeats)
        summary = trace.summary
        row.add(name, summary.new_tokens, wall)
        row.drafted += summary.drafted
        row.accepted += summary.accepted
        row.steps += summary.steps
        row.alpha += [v for step in trace.steps for v in step.overlap]
        row.draft_ms += sum(step.timing.draft for step in trace.steps)
        row.verify_ms += sum(step.timing.verify for step in trace.steps)
        if reference is not None:
            identical &= trace.output.token_ids == reference[prompt]
    row.k = config.k
    row.identical = identical if reference is not None else None


def bench_target_only(row: Row, engine: SpeculativeEngine, config: SpecConfig, repeats: int) -> dict[str, tuple[int, ...]]:
    """SpecViz's own one-token-per-forward loop (engine/decode/baseline.py): the speedup reference."""
    outputs = {}
    for name, prompt in PROMPTS.items():
        prompt_ids = engine.pair.encode_prompt(prompt)
        result, wall = timed(lambda: engine.target_only_ids(prompt_ids, config), repeats)
        outputs[prompt] = result
        row.add(name, len(result), wall)
    row.identical = True if config.is_greedy else None
    return outputs


def bench_hf(row: Row, pair: ModelPair, config: SpecConfig, repeats: int, assisted: str | None,
             reference: dict[str, tuple[int, ...]] | None) -> dict[str, tuple[int, ...]]:
    outputs = {}
    for name, prompt in PROMPTS.items():
        prompt_ids = pair.encode_prompt(prompt)
        tokens, wall = timed(lambda: hf_generate(pair, prompt_ids, config, assisted), repeats)
        outputs[prompt] = tuple(tokens)
        row.add(name, len(tokens), wall)
    row.k = config.k
    if reference is not None:
        row.identical = all(outputs[p] == reference[p] for p in PROMPTS.values())
    return outputs


def target_step_ms(target: Row) -> float:
    """Milliseconds per token of target-only decoding: one target step."""
    return 1000 * target.wall_s / target.tokens


def _measured_alpha_and_k(row: Row, target: Row) -> tuple[float, int] | None:
    """The row's mean per-position overlap a (clamped below 1) and mean draft length k, if measured."""
    if not row.alpha or not row.drafted or not row.steps or not target.tokens:
        return None
    return min(statistics.fmean(row.alpha), 0.999999), max(1, round(row.drafted / row.steps))


def theory(row: Row, target: Row) -> float | None:
    """E(a, k) / (k c + 1) for the row's measured a, mean k and c (draft ms per token over a target step)."""
    measured = _measured_alpha_and_k(row, target)
    if measured is None:
        return None
    alpha, k = measured
    return expected_speedup(alpha, k, row.draft_ms / row.drafted / target_step_ms(target))


def theory_at_measured_verify(row: Row, target: Row) -> float | None:
    """E(a, k) / (k c + v): the theory with the verify forward at its measured cost v (in target steps)."""
    measured = _measured_alpha_and_k(row, target)
    if measured is None:
        return None
    alpha, k = measured
    step = target_step_ms(target)
    return expected_tokens_per_step(alpha, k) / (row.draft_ms / row.steps / step + row.verify_ms / row.steps / step)


def run(args: argparse.Namespace) -> dict:
    preset = "tiny-random" if args.quick else args.preset
    pair = load_pair(preset, draft_dtype="float32", target_dtype="float32", prepack=False)
    bf16_pair = load_pair(preset, draft_dtype="bfloat16", target_dtype="float32", prepack=False)
    fast_pair = load_pair(preset, draft_dtype="int8", target_dtype="float32")      # prepacked target
    # The plain float32 draft on the prepacked target: the dtypes of the transformers rows, SpecViz's kernels.
    packed_pair = replace(fast_pair, draft=pair.draft, draft_dtype="float32", step_costs=DrafterCosts())
    for warm in (pair, bf16_pair, fast_pair):   # first forwards pay for allocation and lazy init: not measured
        SpeculativeEngine(warm).generate("warm up", SpecConfig(k=4, max_new_tokens=8))
        if warm is not fast_pair:
            hf_generate(warm, warm.encode_prompt("warm up"), SpecConfig(k=4, max_new_tokens=8), "same-k")
    fast_name = "SpecViz fast: int8 draft, prepacked fp32 target"
    packed_name = "SpecViz: fp32 draft, prepacked fp32 target"
    wanted = lambda name: not args.only or any(part in name for part in args.only)  # noqa: E731
    rows: list[Row] = []
    for temperature in args.temperatures:
        base = SpecConfig(k=args.k, temperature=temperature, max_new_tokens=args.max_new_tokens, seed=0)
        greedy = temperature == 0.0
        log = lambda name: print(f"  T={temperature:g} {name}", file=sys.stderr)  # noqa: E731
        log("target-only")
        target_row = Row("target-only (SpecViz loop)", temperature)
        reference = bench_target_only(target_row, SpeculativeEngine(pair), base, args.repeats)
        rows.append(target_row)
        check = reference if greedy else None
        for label, hf_pair, assisted in (("target-only (transformers generate)", pair, None),
                                         (f"transformers assisted, k={args.k}", pair, "same-k"),
                                         ("transformers assisted, its defaults", pair, "defaults"),
                                         (f"transformers assisted, bf16 draft, k={args.k}", bf16_pair, "same-k")):
            if not wanted(label):
                continue
            log(label)
            row = Row(label, temperature)
            bench_hf(row, hf_pair, base, args.repeats, assisted, check)
            rows.append(row)
        engines = [
            (f"SpecViz, recorder on, k={args.k}", SpeculativeEngine(pair), base),
            (f"SpecViz, recorder off, k={args.k}", SpeculativeEngine(pair, detailed_trace=False), base),
            ("SpecViz, adaptive k", SpeculativeEngine(pair), base.replace(adaptive_k=True)),
            ("SpecViz, n-gram drafter", SpeculativeEngine(pair), base.replace(drafter=NGRAM_DRAFTER)),
            (f"SpecViz, bf16 draft, k={args.k}", SpeculativeEngine(bf16_pair), base),
            (f"{packed_name}, recorder on, k={args.k}", SpeculativeEngine(packed_pair), base),
            (f"{packed_name}, recorder off, k={args.k}", SpeculativeEngine(packed_pair, detailed_trace=False), base),
        ]
        engines += [(f"{fast_name}, k={k}", SpeculativeEngine(fast_pair), base.replace(k=k)) for k in args.fast_ks]
        engines.append((f"{fast_name}, adaptive k", SpeculativeEngine(fast_pair), base.replace(adaptive_k=True)))
        for name, engine, config in engines:
            if not wanted(name):
                continue
            log(name)
            row = Row(name, temperature)
            exact = config.replace(target_dtype=engine.pair.target_dtype).exactness.token_for_token
            bench_engine(row, engine, config, args.repeats, check if exact else None)
            rows.append(row)
    return {"preset": preset, "machine": machine(), "repeats": args.repeats, "k": args.k,
            "max_new_tokens": args.max_new_tokens, "prompts": PROMPTS, "rows": [table_row(r, rows) for r in rows]}


def table_row(row: Row, rows: list[Row]) -> dict:
    same = [r for r in rows if r.temperature == row.temperature]
    target_row = same[0]                      # SpecViz's own target-only loop on the plain float32 target
    target = target_row.tokens_per_s
    assisted = next((r.tokens_per_s for r in same if r.name.startswith("transformers assisted, k=")), None)
    predicted = theory(row, target_row)
    predicted_at_verify = theory_at_measured_verify(row, target_row)
    verify_cost = row.verify_ms / row.steps / target_step_ms(target_row) if row.steps and target_row.tokens else None
    speedup = row.tokens_per_s / target if target else None
    code_target = same[0].prompt_tokens_per_s("code")
    code_speedup = row.prompt_tokens_per_s("code") / code_target if code_target else None
    return {"name": row.name, "temperature": row.temperature, "tokens_per_s": round(row.tokens_per_s, 2),
            "speedup": round(speedup, 3) if speedup else None,
            "code_speedup": round(code_speedup, 3) if code_speedup else None,
            "vs_assisted": round(row.tokens_per_s / assisted, 3) if assisted else None,
            "acceptance_rate": round(row.accepted / row.drafted, 3) if row.drafted else None,
            "mean_accepted_length": round(row.tokens / row.steps, 3) if row.steps else None,
            "theoretical_speedup": round(predicted, 3) if predicted else None,
            "measured_over_theory": round(speedup / predicted, 3) if predicted and speedup else None,
            "verify_cost": round(verify_cost, 3) if verify_cost else None,
            "theory_at_verify_cost": round(predicted_at_verify, 3) if predicted_at_verify else None,
            "measured_over_theory_at_verify_cost": (round(speedup / predicted_at_verify, 3)
                                                    if predicted_at_verify and speedup else None),
            "identical": row.identical, "tokens": row.tokens, "wall_s": round(row.wall_s, 2)}


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def markdown(results: dict) -> str:
    def cell(value, fmt="{:.2f}", suffix=""):
        return "-" if value is None else ("yes" if value is True else "no" if value is False else fmt.format(value) + suffix)
    lines = [f"Preset `{results['preset']}`, k={results['k']}, {results['max_new_tokens']} new tokens, "
             f"{len(results['prompts'])} prompts, median of {results['repeats']} ({results['machine']}).", "",
             "| configuration | T | tok/s | speedup vs target-only | on the code prompt | vs assisted (same k) | "
             "acceptance | tokens/step | theory speedup | measured/theory | verify cost | measured/theory at verify cost | identical |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        lines.append(f"| {r['name']} | {r['temperature']:g} | {cell(r['tokens_per_s'], '{:.1f}')} | "
                     f"{cell(r['speedup'], suffix='x')} | {cell(r['code_speedup'], suffix='x')} | {cell(r['vs_assisted'], suffix='x')} | {cell(r['acceptance_rate'], '{:.0%}')} | "
                     f"{cell(r['mean_accepted_length'])} | {cell(r['theoretical_speedup'], suffix='x')} | "
                     f"{cell(r['measured_over_theory'])} | {cell(r.get('verify_cost'))} | "
                     f"{cell(r.get('measured_over_theory_at_verify_cost'))} | {cell(r['identical'])} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="qwen-coder")
    parser.add_argument("--quick", action="store_true", help="tiny-random, about a minute")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per prompt; the median is kept")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperatures", default="0,0.7", help="comma-separated; 0 is greedy")
    parser.add_argument("--fast-ks", default="3,5,8", help="comma-separated constant k for the fast pair")
    parser.add_argument("--only", default="", help="parts of row names to run, separated by | "
                        "(e.g. 'assisted, k=|recorder'; target-only always runs)")
    parser.add_argument("--out", default="bench-results.json")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    try:
        args.temperatures = [float(t) for t in args.temperatures.split(",")]
    except ValueError:
        parser.error(f"--temperatures must be comma-separated numbers, got {args.temperatures!r}")
    args.only = [part for part in args.only.split("|") if part]
    try:
        args.fast_ks = [int(k) for k in args.fast_ks.split(",")]
    except ValueError:
        parser.error(f"--fast-ks must be comma-separated whole numbers, got {args.fast_ks!r}")
    try:
        results = run(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
