"""Lab mode: each switched-off piece really breaks what it claims, and the
sampled-draft / greedy-verify mode stays exact."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.lab import LAB_STAGES, cache_drift, first_divergence, stage
from engine.loading.tiny import build_tiny_pair
from oracles import assert_cache_equals_prefill

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
            first_rejection = min(s.index for s in broken.steps if s.num_accepted < s.k)
            assert first_divergence(broken, reference) > first_rejection     # a stale position misleads later steps
        assert any(target > 0 for target, _ in cache_drift(broken))        # stale positions stay
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


@pytest.mark.parametrize("key", [s.key for s in LAB_STAGES])
def test_each_stage_records_what_its_caches_really_did(engine, key):
    """Stages that skip the cutoff remove nothing and say so: their rejected positions are stale."""
    trace = engine.generate("def f(x):", stage(key).apply(SpecConfig(k=4, max_new_tokens=32)))
    caches = {"target": [s.kv_target for s in trace.steps], "draft": [s.kv_draft for s in trace.steps]}
    for name, records in caches.items():
        for previous, record in zip(records, records[1:]):
            assert record.before == previous.after_cutoff, name
        assert all(r.after_cutoff == r.after_forward - r.cutoff for r in records)
        stale = [r.stale for r in records]
        if stage(key).cutoff_mode == "truncate":
            assert set(stale) == {0}
        else:
            assert all(r.cutoff == 0 for r in records) and stale == sorted(stale) and stale[-1] > 0, name
    assert caches["target"][-1].stale == (0 if key == "D" else sum(s.k - s.num_kept for s in trace.steps))
    drift = cache_drift(trace)
    assert [target for target, _ in drift] == [r.stale for r in caches["target"]]    # the target misses nothing
    missing = [r.stale - draft for r, (_, draft) in zip(caches["draft"], drift)]
    assert (max(missing) > 0) == (not stage(key).carryover) and min(missing) >= 0    # A skips d_k: missing, not stale


def test_stage_d_is_the_correct_engine(engine):
    config = stage("D").apply(SpecConfig(k=4, max_new_tokens=24))
    assert not config.is_lab_mode
    trace = engine.with_baseline(engine.generate("Hello, world", config))
    assert trace.summary.baseline.identical and all(d == (0, 0) for d in cache_drift(trace))
    assert [s.key for s in LAB_STAGES] == ["A", "B", "C", "D"]
    with pytest.raises(ValueError, match="unknown lab stage"):
        stage("E")
