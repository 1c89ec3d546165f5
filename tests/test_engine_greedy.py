"""Greedy speculative decoding against its oracles: target-only greedy decoding and
transformers' own assisted generation. Every k, many prompts, three drafters."""

from __future__ import annotations

import pytest
import torch

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from oracles import GREEDY_PROMPTS, assert_identical_to_target_only

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


@pytest.fixture(scope="module")
def noisy_engine() -> SpeculativeEngine:
    return SpeculativeEngine(build_tiny_pair(seed=0))


@pytest.fixture(scope="module")
def copy_engine() -> SpeculativeEngine:
    return SpeculativeEngine(build_tiny_pair(seed=1, draft_noise=0.0))


@pytest.mark.parametrize("k", range(1, 9))
def test_noisy_draft_matches_target_only(noisy_engine, k):
    rates = []
    for prompt in GREEDY_PROMPTS:
        trace = assert_identical_to_target_only(noisy_engine, prompt, SpecConfig(k=k, max_new_tokens=24))
        rates.append(trace.summary.acceptance_rate)
    assert 0.0 < sum(rates) / len(rates) < 1.0          # drafts really are both accepted and rejected


@pytest.mark.parametrize("k", range(1, 9))
def test_identical_draft_accepts_everything_and_matches(copy_engine, k):
    for prompt in GREEDY_PROMPTS:
        trace = assert_identical_to_target_only(copy_engine, prompt, SpecConfig(k=k, max_new_tokens=24))
        full_steps = [s for s in trace.steps if s.k > 0]
        assert all(s.num_accepted == s.k for s in full_steps)
        assert all(s.emitted[-1].kind == "bonus" for s in full_steps if not s.eos and len(s.emitted) == s.k + 1)
        # every step after the first carries d_k + bonus over into the draft model
        assert all(len(s.carryover) == 2 for s in trace.steps[1:] if trace.steps[s.index - 1].k > 0)


@pytest.mark.parametrize("k", [1, 3, 5, 8])
def test_ngram_drafter_matches_target_only(noisy_engine, k):
    drafted = 0
    for prompt in GREEDY_PROMPTS:
        trace = assert_identical_to_target_only(noisy_engine, prompt,
                                                SpecConfig(k=k, drafter="ngram", max_new_tokens=24))
        drafted += trace.summary.drafted
        assert all(s.kv_draft is None for s in trace.steps)
    assert drafted > 0                                    # lookups did find matches


def test_adaptive_and_confidence_drafting_match_target_only(noisy_engine):
    for prompt in GREEDY_PROMPTS[:5]:
        trace = assert_identical_to_target_only(
            noisy_engine, prompt, SpecConfig(k=3, adaptive_k=True, confidence_threshold=0.3, max_new_tokens=24))
        assert all(1 <= s.k <= 6 for s in trace.steps[:-1])


def test_adaptive_k_starts_at_k_and_stays_within_twice_k(copy_engine):
    trace = assert_identical_to_target_only(copy_engine, "Hello", SpecConfig(k=2, adaptive_k=True, max_new_tokens=40))
    ks = [s.k for s in trace.steps]
    assert ks[0] == 2
    assert all(1 <= k <= 4 for k in ks[:-1])
    assert all(s.num_accepted == s.k for s in trace.steps)     # draft == target: every draft accepted


@pytest.mark.parametrize("k", [2, 5])
def test_matches_transformers_assisted_generation(noisy_engine, k):
    pair = noisy_engine.pair
    for prompt in GREEDY_PROMPTS[:6]:
        trace = noisy_engine.generate(prompt, SpecConfig(k=k, max_new_tokens=20))
        input_ids = torch.tensor([list(trace.prompt.token_ids)])
        expected = pair.target.generate(
            input_ids, attention_mask=torch.ones_like(input_ids), assistant_model=pair.draft, do_sample=False,
            max_new_tokens=20, num_assistant_tokens=k, num_assistant_tokens_schedule="constant",
            pad_token_id=pair.tokenizer.pad_token_id, eos_token_id=sorted(pair.eos_token_ids))
        assert list(trace.output.token_ids) == expected[0, input_ids.shape[1]:].tolist()


def test_bfloat16_draft_with_float32_target_stays_exact():
    pair = build_tiny_pair(seed=0)
    pair.draft = pair.draft.to(torch.bfloat16)
    pair.draft_dtype = "bfloat16"
    engine = SpeculativeEngine(pair)
    for prompt in GREEDY_PROMPTS[:4]:
        trace = assert_identical_to_target_only(engine, prompt, SpecConfig(k=4, max_new_tokens=24))
        assert trace.config.draft_dtype == "bfloat16" and trace.summary.baseline.exact_expected


def test_same_seed_gives_same_tokens_and_verdicts(noisy_engine):
    config = SpecConfig(k=4, temperature=0.9, top_p=0.95, max_new_tokens=30, seed=7)
    first, second = (noisy_engine.generate("Hello there", config) for _ in range(2))
    assert first.output.token_ids == second.output.token_ids
    assert [s.verdicts for s in first.steps] == [s.verdicts for s in second.steps]
    other = noisy_engine.generate("Hello there", config.replace(seed=8))
    assert other.output.token_ids != first.output.token_ids
