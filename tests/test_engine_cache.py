"""KV cache invariants, cut counts, stopping rules and a scripted drafter whose
summary can be checked by hand."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import DynamicCache

from engine.config import SpecConfig
from engine.drafters import Proposal
from engine.engine import SpeculativeEngine
from engine.generation import Generation
from engine.tiny import build_tiny_pair


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(seed=3)


def fresh_prefill(model, token_ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([token_ids]), past_key_values=cache, use_cache=True)
    return [(layer.keys, layer.values) for layer in cache.layers]


def assert_cache_equals_prefill(kv, model, token_ids: list[int]):
    assert kv.length == len(token_ids)
    for (keys, values), (want_keys, want_values) in zip(kv.key_values(), fresh_prefill(model, token_ids)):
        assert torch.allclose(keys, want_keys, rtol=1e-4, atol=1e-4), (keys - want_keys).abs().max()
        assert torch.allclose(values, want_values, rtol=1e-4, atol=1e-4), (values - want_values).abs().max()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_caches_equal_a_fresh_prefill_after_every_step(pair, k, temperature):
    engine = SpeculativeEngine(pair)
    generation = engine.start("The cache must match", SpecConfig(k=k, temperature=temperature, max_new_tokens=30, seed=2))
    while not generation.is_done:
        step = generation.step()
        committed = generation.committed
        # the target has seen everything but the last emitted token (its pending token)
        assert_cache_equals_prefill(generation.target, pair.target, committed[:generation.target.num_committed])
        assert generation.target.num_committed == len(committed) - 1 or step.eos
        drafter = generation.drafter
        assert_cache_equals_prefill(drafter.kv, pair.draft, committed[:drafter.kv.num_committed])
        # DESIGN section 2: target loses k - accepted, the draft max(0, k - accepted - 1)
        assert step.kv_target.cutoff == step.k - step.num_accepted
        assert step.kv_draft.cutoff == max(0, step.k - step.num_accepted - 1)
        assert step.kv_target.after_forward - step.kv_target.cutoff == step.kv_target.after_cutoff
        assert step.kv_draft.after_forward - step.kv_draft.cutoff == step.kv_draft.after_cutoff


def test_pending_tokens_after_full_acceptance_are_d_k_and_bonus():
    pair = build_tiny_pair(seed=1, draft_noise=0.0)
    generation = SpeculativeEngine(pair).start("abc", SpecConfig(k=3, max_new_tokens=20))
    first = generation.step()
    assert first.num_accepted == 3 and first.emitted[-1].kind == "bonus"
    second = generation.step()
    assert [t.id for t in second.carryover] == [first.draft[-1].id, first.emitted[-1].id]
    assert second.kv_draft.before == first.kv_draft.after_cutoff
    assert second.kv_draft.after_forward == second.kv_draft.before + 2 + 3 - 1


def test_max_new_tokens_is_exact_and_k_shrinks_to_the_budget():
    pair = build_tiny_pair(seed=1, draft_noise=0.0)
    engine = SpeculativeEngine(pair)
    for max_new in (1, 2, 3, 5, 11):
        trace = engine.generate("budget", SpecConfig(k=8, max_new_tokens=max_new))
        if not trace.steps[-1].eos:
            assert trace.summary.new_tokens == max_new
        assert all(s.k <= max_new - 1 for s in trace.steps)
    one = engine.generate("budget", SpecConfig(k=8, max_new_tokens=1))
    assert one.steps[0].k == 0 and one.summary.new_tokens == 1         # a plain target step


def eos_pair_at(position: int):
    """A draft == target pair whose EOS is redefined as the token greedy decoding emits at `position`."""
    pair = build_tiny_pair(seed=1, draft_noise=0.0)
    free = SpeculativeEngine(pair).generate("stop here", SpecConfig(k=4, max_new_tokens=20))
    eos = free.output.token_ids[position]
    if eos in free.output.token_ids[:position]:
        pytest.skip("chosen token appears earlier")
    pair.target.generation_config.eos_token_id = eos
    return pair, free.output.token_ids[:position + 1]


def test_eos_inside_a_drafted_run_ends_generation_there():
    pair, expected = eos_pair_at(6)     # step 0 emits 5 tokens (k=4, all accepted): EOS is the 2nd of step 1
    trace = SpeculativeEngine(pair).with_baseline(
        SpeculativeEngine(pair).generate("stop here", SpecConfig(k=4, max_new_tokens=20)))
    assert trace.output.token_ids == expected
    last = trace.steps[-1]
    assert last.eos and last.num_accepted > len(last.emitted) - 1      # accepted drafts after EOS were dropped
    assert trace.summary.baseline.identical


class ScriptedDrafter:
    """Proposes fixed token lists, one per step: isolates the engine from a draft model."""

    has_cache = False

    def __init__(self, script: list[list[int]]):
        self.script = list(script)

    def propose(self, committed: list[int], k: int) -> Proposal:
        return Proposal(self.script.pop(0)[:k] if self.script else [], None)

    def on_verified(self, proposal: Proposal, num_accepted: int) -> None:
        return None


def test_scripted_drafter_summary_by_hand(pair):
    engine = SpeculativeEngine(pair)
    reference = engine.generate("scripted", SpecConfig(k=4, drafter="ngram", max_new_tokens=12))
    out = list(engine.target_only(reference).token_ids)
    wrong = (out[0] + 1) % 50 + 4
    # step 0: 3 right drafts -> 3 accepted + bonus; step 1: wrong first -> 0 accepted + recovered;
    # step 2: 2 right then wrong -> 2 accepted + recovered; then no drafts.
    script = [out[0:3], [wrong, out[5]], [out[5], out[6], wrong, wrong]]
    generation = Generation(pair, "scripted", list(reference.prompt.token_ids),
                            SpecConfig(k=4, drafter="ngram", max_new_tokens=12), drafter=ScriptedDrafter(script))
    while not generation.is_done:
        generation.step()
    trace = generation.trace()
    assert list(trace.output.token_ids) == out
    assert [s.num_accepted for s in trace.steps[:3]] == [3, 0, 2]
    assert [s.k for s in trace.steps[:3]] == [3, 2, 4]
    summary = trace.summary
    assert summary.drafted == 9 and summary.accepted == 5
    assert summary.acceptance_rate == pytest.approx(5 / 9)
    assert summary.steps == 3 + (12 - 8)                                 # 4 + 1 + 3 tokens, then single steps
    assert summary.mean_accepted_length == pytest.approx(12 / summary.steps)
    # position 0: reached in all 3 steps, accepted in 2; position 1: steps 0 and 2, both accepted;
    # position 2: steps 0 (accepted) and 2 (rejected); position 3: never reached (step 2 rejected at 2)
    assert summary.per_position_acceptance == pytest.approx((2 / 3, 1.0, 1 / 2, None))
    assert summary.accepted_length_histogram[:4] == (1 + 4, 0, 1, 1)
    assert [e.kind for e in trace.steps[0].emitted] == ["accepted"] * 3 + ["bonus"]
    assert [e.kind for e in trace.steps[1].emitted] == ["recovered"]


def test_bad_prompts_are_refused_with_a_sentence(pair):
    engine = SpeculativeEngine(pair)
    with pytest.raises(ValueError, match="empty"):
        engine.start("   ", SpecConfig())
    with pytest.raises(ValueError, match="context"):
        engine.start("x" * 2000, SpecConfig(max_new_tokens=10))
    ngram_only = dataclasses.replace(pair, draft=None, draft_name="ngram", default_drafter="ngram")
    with pytest.raises(ValueError, match="n-gram"):
        SpeculativeEngine(ngram_only).start("hi", SpecConfig(drafter="model"))
