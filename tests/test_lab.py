"""Lab mode: each switched-off piece really breaks what it claims, and the
sampled-draft / greedy-verify mode stays exact."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.engine import SpeculativeEngine
from engine.lab import LAB_STAGES, cache_drift, first_divergence, stage
from engine.tiny import build_tiny_pair
from test_engine_cache import assert_cache_equals_prefill

PROMPTS = ["Hello, world", "def f(x):", "The quick brown fox", "1 2 3 4"]


@pytest.fixture(scope="module")
def engine():
    return SpeculativeEngine(build_tiny_pair(seed=0))


@pytest.mark.parametrize("cutoff_mode", ["none", "zero_fill"])
def test_keeping_rejected_positions_corrupts_the_output(engine, cutoff_mode):
    diverged = 0
    for prompt in PROMPTS:
        config = SpecConfig(k=4, max_new_tokens=32, cutoff_mode=cutoff_mode)
        broken = engine.with_baseline(engine.generate(prompt, config))
        reference = engine.target_only(broken).token_ids
        if not broken.summary.baseline.identical:
            diverged += 1
            assert first_divergence(broken, reference) is not None
        assert any(target > 0 for target, _ in cache_drift(broken))        # stale positions stay
        assert not broken.summary.baseline.exact_expected
    assert diverged >= len(PROMPTS) // 2


def test_stale_cache_differs_from_a_fresh_prefill(engine):
    generation = engine.start("Hello, world", SpecConfig(k=4, max_new_tokens=12, cutoff_mode="zero_fill"))
    while not generation.is_done:
        step = generation.step()
        if step.num_accepted < step.k:
            with pytest.raises(AssertionError):
                assert_cache_equals_prefill(generation.target, engine.pair.target,
                                            generation.committed[:generation.target.num_committed])
            return
    pytest.fail("no rejection happened")


def test_no_carryover_lowers_acceptance_on_a_draft_equal_to_the_target():
    engine = SpeculativeEngine(build_tiny_pair(seed=1, draft_noise=0.0))
    for prompt in PROMPTS:
        correct = engine.generate(prompt, SpecConfig(k=4, max_new_tokens=40))
        broken = engine.generate(prompt, SpecConfig(k=4, max_new_tokens=40, carryover=False))
        assert correct.summary.acceptance_rate == 1.0
        assert broken.summary.acceptance_rate < 1.0
        assert any(draft is not None and draft < 0 for _, draft in cache_drift(broken))   # a position is missing
        assert engine.with_baseline(broken).summary.baseline.identical     # the target still decides


def test_sampled_drafting_with_greedy_verification_stays_exact(engine):
    for prompt in PROMPTS:
        trace = engine.with_baseline(engine.generate(prompt, SpecConfig(k=4, max_new_tokens=24, draft_temperature=1.0,
                                                                        seed=3)))
        assert trace.summary.baseline.identical


def test_stage_d_is_the_correct_engine(engine):
    config = stage("D").apply(SpecConfig(k=4, max_new_tokens=24))
    assert not config.is_lab_mode
    trace = engine.with_baseline(engine.generate("Hello, world", config))
    assert trace.summary.baseline.identical and all(d == (0, 0) for d in cache_drift(trace))
    assert [s.key for s in LAB_STAGES] == ["A", "B", "C", "D"]
    with pytest.raises(ValueError, match="unknown lab stage"):
        stage("E")
