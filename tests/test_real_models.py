"""The embedded default pairs end to end (marker real_models; CI runs it): greedy
speculative output is identical to target-only decoding on the real models."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.engine import SpeculativeEngine
from engine.models import load_pair

pytestmark = pytest.mark.real_models

PROMPT = "Write a Python function that reverses a linked list."


def test_qwen_coder_greedy_is_identical_to_target_only():
    engine = SpeculativeEngine(load_pair("qwen-coder", draft_dtype="bfloat16"))
    trace = engine.with_baseline(engine.generate(PROMPT, SpecConfig(k=4, max_new_tokens=32)))
    summary = trace.summary
    assert summary.new_tokens == 32 and summary.baseline.identical and summary.baseline.exact_expected
    assert summary.acceptance_rate > 0.3                       # the real draft does predict the target
    assert all(s.kv_target.after_cutoff == s.context_len + s.num_emitted - 1 for s in trace.steps)


def test_smollm2_ngram_greedy_is_identical_to_target_only():
    engine = SpeculativeEngine(load_pair("smollm2-ngram"))
    prompt = "Repeat exactly: red green blue, red green blue, red green blue."
    trace = engine.with_baseline(engine.generate(prompt, SpecConfig(k=4, drafter="ngram", max_new_tokens=32)))
    assert trace.summary.baseline.identical
    assert trace.summary.drafted > 0 and trace.summary.accepted > 0   # prompt lookup found and kept tokens
