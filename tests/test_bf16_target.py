"""A bfloat16 target where the CPU computes bfloat16 natively (engine/runtime/cpu/native_bf16.py,
load_pair's target_dtype "bfloat16-native"): prepacked in bfloat16 there, and greedy speculative
output equal token for token to target-only greedy decoding of that same bfloat16 target on the
same kernels, up to near ties: bfloat16 rounds a verify over k + 1 rows differently from one row,
and the tiny random pair has exact ties in bfloat16 (two logits of 7.9375), so its check is that the
outputs agree up to their first difference and that there the two tokens' logits are within bfloat16
rounding of each other (a cache or acceptance bug picks tokens far apart). On a CPU without native bfloat16 (AVX2 only, or torch capped below AVX-512) the
loader keeps the float32 target and says why; these tests check that fallback instead of skipping.
"""

from __future__ import annotations

import pytest
import torch

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.config import NATIVE_BF16
from engine.runtime.cpu.native_bf16 import cpu_target_dtype, native_bf16_refusal
from engine.runtime.kernel_names import ONEDNN_PREPACKED

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

PROMPTS = ["hello world", "the cat sat on", "0123456789", "speculative decoding", "abcabcabc", "zz"]
AVX2_FLAGS = {"avx2": True, "fma": True, "avx512f": False, "avx512_bf16": False, "amx_bf16": False}


def _load(preset: str, draft_dtype: str):
    messages: list[str] = []
    pair = load_pair(preset, device="cpu", draft_dtype=draft_dtype, target_dtype=NATIVE_BF16,
                     progress=lambda fraction, message: messages.append(message))
    return pair, messages


NEAR_TIE = 0.02        # a logit gap within 2 % of the top logit: a few bfloat16 rounding steps


def _differences(pair, config: SpecConfig, prompts: list[str]) -> list[tuple[str, int, float, float]]:
    """(prompt, first differing position, logit gap there, top logit) for each prompt whose
    speculative greedy ids differ from the same pair's target-only greedy ids; the gap is between the
    two tokens' logits in one forward of the target over the prompt and the agreed tokens."""
    engine = SpeculativeEngine(pair)
    found = []
    for prompt in prompts:
        prompt_ids = pair.encode_prompt(prompt)
        spec = list(engine.generate(prompt, config).output.token_ids)
        alone = list(engine.target_only_ids(prompt_ids, config))
        if spec == alone:
            continue
        at = next((i for i, (a, b) in enumerate(zip(spec, alone)) if a != b), min(len(spec), len(alone)))
        if at == min(len(spec), len(alone)):          # one stopped early (EOS) where the other did not
            found.append((prompt, at, float("inf"), 0.0))
            continue
        with torch.inference_mode():
            logits = pair.target(torch.tensor([prompt_ids + alone[:at]])).logits[0, -1].float()
        found.append((prompt, at, abs(logits[spec[at]] - logits[alone[at]]).item(), logits.max().item()))
    return found


def test_a_cpu_without_native_bf16_keeps_the_float32_target_and_says_why():
    """Oracle: the flags of an AVX2-only CPU, whatever CPU runs the test."""
    dtype, reason = cpu_target_dtype(AVX2_FLAGS)
    assert dtype == "float32"
    assert reason is not None and "no native bfloat16" in reason


def test_the_tiny_pair_runs_the_target_the_cpu_allows_and_greedy_equals_its_own_target_only():
    pair, messages = _load("tiny-random", "int8")
    reason = native_bf16_refusal()
    if reason is None:
        assert pair.target_dtype == "bfloat16" and next(pair.target.parameters()).dtype == torch.bfloat16
        assert pair.target_kernel == ONEDNN_PREPACKED
        assert any("computes bfloat16 natively" in message for message in messages)
    else:       # AVX2 only, or torch capped: the float32 prepacked default, with the reason in the progress
        assert pair.target_dtype == "float32" and next(pair.target.parameters()).dtype == torch.float32
        assert any(reason in message for message in messages)
    for k in (1, 4):
        config = SpecConfig(k=k, max_new_tokens=24, temperature=0.0)
        differences = _differences(pair, config, PROMPTS)
        assert len(differences) < len(PROMPTS) // 2, differences         # most prompts agree token for token
        assert all(gap <= NEAR_TIE * max(1.0, top) for _, _, gap, top in differences), differences


@pytest.mark.real_models
def test_the_default_pair_in_bf16_greedy_equals_its_own_bf16_target_only():
    """One process, about 3 GB: the default pair's target in bfloat16 where native (else float32)."""
    pair, _ = _load(None, "int8")
    assert pair.target_dtype == ("bfloat16" if native_bf16_refusal() is None else "float32")
    config = SpecConfig(k=5, max_new_tokens=32, temperature=0.0)
    assert _differences(pair, config, ["Write a Python function that reverses a string.",
                                       "def fibonacci(n):"]) == []


def test_the_page_says_a_bf16_targets_identity_is_with_itself_and_float32s_is_another_claim():
    """The Run tab's settings line (specviz/run/output_view.py) on a real greedy trace of a bfloat16 target."""
    import dataclasses
    from engine.loading.tiny import build_tiny_pair
    from specviz.run.output_view import _config_line
    pair = build_tiny_pair(seed=0, dtype=torch.bfloat16)
    trace = SpeculativeEngine(pair).generate("hello", SpecConfig(k=2, max_new_tokens=4))
    line = _config_line(trace)
    assert "(bfloat16)" in line and "this same bfloat16 target" in line and "a different claim" in line
    as_float32 = dataclasses.replace(trace, config=trace.config.replace(target_dtype="float32"))
    sampled = dataclasses.replace(trace, config=trace.config.replace(temperature=0.7))
    assert "a different claim" not in _config_line(as_float32) and "a different claim" not in _config_line(sampled)
