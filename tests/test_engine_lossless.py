"""Speculative sampling is lossless: over 1500 seeded runs, the joint law of the first four
generated tokens is the exact law of target-only sampling (enumerated over a 6-token
vocabulary; Pearson's chi-square at a false-alarm rate of 1e-4), for a draft model at k = 2
and 3 and for n-gram lookup, and on a static cache (the GPU's kind). Each run spans several
steps, and the test checks that rejections past the first draft position, bonus tokens and the
draft's carryover really happened. tests/test_fault_injection.py plants the bugs this test
exists for and sees it fail."""

from __future__ import annotations

import dataclasses

import pytest

from engine.decode.speculative import SpeculativeEngine
from oracles import LAW_CASES, assert_follows_target_law, law_pair

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

STATIC_LAW_CASE = dataclasses.replace(LAW_CASES[0], cache="static")      # k = 2 over 5 tokens: every path


@pytest.fixture(scope="module")
def engine() -> SpeculativeEngine:
    return SpeculativeEngine(law_pair(), detailed_trace=False)


@pytest.mark.parametrize("case", LAW_CASES + (STATIC_LAW_CASE,), ids=str)
def test_first_tokens_follow_the_target_law(engine, case):
    exercised = assert_follows_target_law(engine, case).exercised
    assert 0.05 < exercised.acceptance_rate < 0.5, "both accept and reject paths must run"
    often = case.runs // 20
    assert exercised.multi_step_runs > often
    assert exercised.late_rejections > often           # residual rows past the first draft position
    assert exercised.bonus_tokens > often
    if case.has_full_carryover:
        assert exercised.full_carryovers > often // 2  # d_k and the bonus fed to the draft first
