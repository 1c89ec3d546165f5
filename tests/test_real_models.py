"""The embedded default pairs end to end (marker real_models; CI runs it): greedy
speculative output is identical to target-only decoding on the real models, on either KV cache."""

from __future__ import annotations

import gc

import pytest
import torch

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.models import load_pair

pytestmark = pytest.mark.real_models

PROMPT = "Write a Python function that reverses a linked list."


def test_qwen_coder_greedy_is_identical_to_target_only():
    engine = SpeculativeEngine(load_pair("qwen-coder", draft_dtype="bfloat16"))
    trace = engine.with_baseline(engine.generate(PROMPT, SpecConfig(k=4, max_new_tokens=32)))
    summary = trace.summary
    assert summary.new_tokens == 32 and summary.baseline.identical and summary.baseline.exact_expected
    assert summary.acceptance_rate > 0.3                       # the real draft does predict the target
    assert all(s.kv_target.after_cutoff == s.context_len + s.num_kept and s.kv_target.stale == 0 for s in trace.steps)


def test_qwen_coder_fast_pair_is_identical_to_the_plain_float32_target():
    """The fastest setting (int8 draft, oneDNN-prepacked float32 target, adaptive k and a
    long constant k) against transformers' greedy generate() on the unmodified float32 target."""
    plain = load_pair("qwen-coder", draft="ngram", prepack=False)          # the target only, as loaded
    prompts = [PROMPT, "Explain in two sentences what a hash map is."]
    expected = {}
    for prompt in prompts:
        ids = torch.tensor([plain.encode_prompt(prompt)])
        with torch.inference_mode():
            out = plain.target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32, do_sample=False,
                                        eos_token_id=sorted(plain.eos_token_ids), pad_token_id=plain.tokenizer.pad_token_id)
        expected[prompt] = out[0, ids.shape[1]:].tolist()
    del plain
    gc.collect()
    fast = load_pair("qwen-coder", draft_dtype="auto")
    assert fast.prepacked and fast.draft_dtype == "int8"
    engine = SpeculativeEngine(fast)
    for prompt in prompts:
        for config in (SpecConfig(k=8, max_new_tokens=32), SpecConfig(k=5, adaptive_k=True, max_new_tokens=32),
                       SpecConfig(k=5, max_new_tokens=32, cache="static")):        # the GPU's cache kind, on the CPU
            trace = engine.generate(prompt, config)
            assert list(trace.output.token_ids) == expected[prompt], (prompt, config.k, config.adaptive_k, config.cache)
            assert trace.summary.acceptance_rate > 0.3


def test_smollm2_ngram_greedy_is_identical_to_target_only():
    engine = SpeculativeEngine(load_pair("smollm2-ngram"))
    prompt = "Repeat exactly: red green blue, red green blue, red green blue."
    trace = engine.with_baseline(engine.generate(prompt, SpecConfig(k=4, drafter="ngram", max_new_tokens=32)))
    assert trace.summary.baseline.identical
    assert trace.summary.drafted > 0 and trace.summary.accepted > 0   # prompt lookup found and kept tokens
