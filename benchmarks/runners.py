"""How each kind of configuration is decoded and timed: SpecViz's engine, SpecViz's
target-only loop (engine/decode/baseline.py), and transformers' generate(), target-only or
assisted. Every prompt runs `repeats` times; the median wall time is kept."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.configurations import (DERIVED, ENGINE, HF_ASSISTED, HF_ASSISTED_DEFAULTS, HF_TARGET_ONLY,
                                       INT4_DERIVED, PAIRS, SUITES, TARGET_ONLY, Configuration, Suite)
from benchmarks.prompts import PROMPTS
from benchmarks.rows import Row, timed
from engine.config import SpecConfig
from engine.decode.adaptive import DrafterCosts
from engine.decode.baseline import target_only
from engine.decode.pair import ModelPair
from engine.decode.speculative import SpeculativeEngine
from benchmarks.shapes import random_pair
from engine.loading.cost_probe import measure_costs
from engine.runtime.kernel_names import STOCK
from engine.runtime.cpu.kernels import kernel_of, quantize_int4, quantized_draft_refusal
from engine.loading.models import load_pair
from engine.loading.speed_up import graph_backend, prepare_static_runners

Outputs = dict[str, tuple[int, ...]]


def load_pairs(preset: str, configurations: list[Configuration], suite: Suite = SUITES["cpu"],
               random_weights: Path | None = None, device: str | None = None, shape: str = "default"
               ) -> dict[str, ModelPair]:
    """Each pair the configurations need, loaded once and warmed up (the first forwards pay for
    allocation and lazy initialisation: not measured). `random_weights` (a GPU without the
    preset's weights): random models at the default pair's shapes, their config and tokenizer
    from that folder (benchmarks/shapes.py: `shape` names them), graphs captured as a load would.
    `device` overrides the suite's (the GPU suite's rows on a CPU, for its tests)."""
    needed = {c.pair for c in configurations}
    options = {key: {**value, **({"device": device} if device and key == "gpu" else {})}
               for key, value in suite.pairs.items()}
    if random_weights is not None:
        where = torch.device(options["gpu"]["device"])
        pair = random_pair(shape, where, torch.bfloat16 if where.type == "cuda" else torch.float32, random_weights)
        prepare_static_runners(pair, graph_backend(where))
        pair.device_costs = measure_costs(pair, "static")
        pairs = {"gpu": pair}
    else:
        sources = {DERIVED: ("plain", "fast"), INT4_DERIVED: ("plain", "bf16-target")}   # the pairs each is built from
        keys = [key for key in options if key in needed or any(key in sources.get(pair, ()) for pair in needed)]
        pairs = {key: load_pair(preset, **options[key]) for key in keys}
    if DERIVED in needed:
        pairs[DERIVED] = replace(pairs["fast"], draft=pairs["plain"].draft, draft_dtype="float32",
                                 draft_kernel=STOCK, step_costs=DrafterCosts())
    if INT4_DERIVED in needed:
        draft = copy.deepcopy(pairs["plain"].draft)
        if quantize_int4(draft) == 0:
            raise SystemExit(f"bench: an int4 draft cannot run here: {quantized_draft_refusal('int4')}")
        pairs[INT4_DERIVED] = replace(pairs["bf16-target"], draft=draft, draft_dtype="int4",
                                      draft_kernel=kernel_of(draft), step_costs=DrafterCosts())
    warm_up = SpecConfig(k=4, max_new_tokens=8)
    for key, pair in pairs.items():
        for cache in ("dynamic", "static") if suite.device == "cuda" else ("auto",):
            SpeculativeEngine(pair).generate("warm up", warm_up.replace(cache=cache))
        if key not in ("fast", "bf16-target", INT4_DERIVED):     # the pairs that no transformers row runs on skip its warm-up
            for kind in (HF_TARGET_ONLY, HF_ASSISTED):          # transformers' own generate, warmed alike
                hf_generate(pair, pair.encode_prompt("warm up"), warm_up, kind)
    return pairs


def measure(configuration: Configuration, row: Row, pair: ModelPair, config: SpecConfig, repeats: int,
            reference: Outputs | None) -> Outputs:
    """Fill `row`; returns the generated ids per prompt. `reference` (greedy only) is the stock
    target-only output that the row's output is compared with."""
    if configuration.kind == ENGINE:
        return _engine(row, SpeculativeEngine(pair, detailed_trace=configuration.detailed_trace), config,
                       repeats, reference)
    outputs: Outputs = {}
    for name, prompt in PROMPTS.items():
        prompt_ids = pair.encode_prompt(prompt)
        if configuration.kind == TARGET_ONLY:
            result, wall = timed(lambda: target_only(pair, prompt_ids, config), repeats)
            tokens = result.token_ids
            row.prefill_ms += 1000 * result.prefill_s
        else:
            tokens, wall = timed(lambda: hf_generate(pair, prompt_ids, config, configuration.kind), repeats)
        outputs[prompt] = tuple(tokens)
        row.add(name, len(tokens), wall)
    if reference is not None:
        row.identical = all(outputs[prompt] == reference[prompt] for prompt in PROMPTS.values())
    return outputs


def hf_generate(pair: ModelPair, prompt_ids: list[int], config: SpecConfig, kind: str) -> list[int]:
    """transformers' generate(): target-only, or assisted at the same k or at its defaults."""
    input_ids = torch.tensor([prompt_ids], device=pair.device)
    kwargs = dict(max_new_tokens=config.max_new_tokens, attention_mask=torch.ones_like(input_ids),
                  pad_token_id=pair.tokenizer.pad_token_id or sorted(pair.eos_token_ids)[0],
                  eos_token_id=sorted(pair.eos_token_ids))
    kwargs.update(dict(do_sample=True, temperature=config.temperature, top_p=1.0, top_k=0)
                  if config.temperature > 0 else dict(do_sample=False))
    if kind == HF_ASSISTED:
        kwargs.update(assistant_model=pair.draft, num_assistant_tokens=config.k,
                      num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
    elif kind == HF_ASSISTED_DEFAULTS:
        kwargs.update(assistant_model=pair.draft)
    elif kind != HF_TARGET_ONLY:
        raise ValueError(f"not a transformers configuration: {kind}")
    with torch.inference_mode():
        output = pair.target.generate(input_ids, **kwargs)
    return output[0, len(prompt_ids):].tolist()


def _engine(row: Row, engine: SpeculativeEngine, config: SpecConfig, repeats: int, reference: Outputs | None) -> Outputs:
    outputs: Outputs = {}
    exact = config.replace(target_dtype=engine.pair.target_dtype).exactness.token_for_token
    for name, prompt in PROMPTS.items():
        trace, wall = timed(lambda: engine.generate(prompt, config), repeats)
        summary = trace.summary
        row.add(name, summary.new_tokens, wall)
        row.drafted += summary.drafted
        row.accepted += summary.accepted
        row.steps += summary.steps
        row.verify_steps += summary.verify_steps
        row.alpha += [v for step in trace.steps for v in step.overlap]
        row.draft_ms += sum(step.timing.draft for step in trace.steps)
        row.verify_ms += sum(step.timing.verify for step in trace.steps)
        row.engine_ms += sum(step.timing.engine or 0.0 for step in trace.steps)
        row.steps_ms += sum(step.timing.total for step in trace.steps)
        outputs[prompt] = tuple(trace.output.token_ids)
    if reference is not None and exact:
        row.identical = all(outputs[prompt] == reference[prompt] for prompt in PROMPTS.values())
    return outputs
