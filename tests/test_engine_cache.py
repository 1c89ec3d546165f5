"""KV cache invariants, cut counts, stopping rules and a scripted drafter whose
summary can be checked by hand; the KV records against what each cache really holds,
in every cutoff mode."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
import torch

from engine.config import CUTOFF_MODES, SpecConfig
from engine.decode.drafters import Proposal
from engine.decode.speculative import SpeculativeEngine
from engine.decode.generation import Generation
from engine.decode.kv import KVCache
from engine.lab import cache_drift
from engine.loading.tiny import build_tiny_pair
from engine.formats.trace import Trace
from oracles import CACHE_PROMPT, assert_cache_equals_prefill, assert_caches_match_prefill_every_step


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(seed=3)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_caches_equal_a_fresh_prefill_after_every_step(pair, k, temperature):
    trace = assert_caches_match_prefill_every_step(SpeculativeEngine(pair), CACHE_PROMPT,
                                                   SpecConfig(k=k, temperature=temperature, max_new_tokens=30, seed=2))
    for step in trace.steps:
        # DESIGN section 2: target loses k - accepted, the draft max(0, k - accepted - 1) (kept: up to an EOS)
        assert step.kv_target.cutoff == step.k - step.num_kept
        assert step.kv_draft.cutoff == max(0, step.k - step.num_kept - 1)
        assert step.kv_target.stale == step.kv_draft.stale == 0
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


# --- the KV records say what really happened, in every mode --------------------------------------

class CacheWitness:
    """Follows a generation from what each cache was really fed (a spy on KVCache.forward) and
    the committed text, row by row, and checks every KV record against the caches' contents.

    A row is committed text when it holds a pending token (committed before the step) or a draft
    the output kept (an emitted "accepted" token); other rows hold rejected drafts or drafts after
    an EOS: truncation removes them, the lab modes leave them (zero-filled or not) as stale rows.
    """

    def __init__(self, generation: Generation, monkeypatch: pytest.MonkeyPatch):
        self.generation = generation
        self.mode = generation.config.cutoff_mode
        self.fed: dict[int, list[int]] = defaultdict(list)
        forward = KVCache.forward

        def spy(kv: KVCache, token_ids: list[int], num_logits: int):
            self.fed[id(kv)].extend(token_ids)
            return forward(kv, token_ids, num_logits)

        monkeypatch.setattr(KVCache, "forward", spy)
        self.caches = {"target": generation.target}
        if getattr(generation.drafter, "kv", None) is not None:
            self.caches["draft"] = generation.drafter.kv
        self.rows: dict[str, list[tuple[int, bool]]] = {name: [] for name in self.caches}
        self.draft_text_len = 0                 # committed tokens a correct draft cache covers
        self.skipped: set[int] = set()          # committed positions the draft never fed (no carryover)

    def run(self) -> None:
        while not self.generation.is_done:
            self.step()

    def step(self) -> None:
        fed_before = {name: len(self.fed[id(kv)]) for name, kv in self.caches.items()}
        previous = self.generation.records[-1] if self.generation.records else None
        step = self.generation.step()
        committed = self.generation.committed
        kept = [token.kind == "accepted" for token in step.emitted]
        for name, kv in self.caches.items():
            record = step.kv_target if name == "target" else step.kv_draft
            chunk = self.fed[id(kv)][fed_before[name]:]
            num_drafts = step.k if name == "target" else max(step.k - 1, 0)      # the draft never feeds d_k
            drafts = chunk[len(chunk) - num_drafts:]
            assert drafts == [token.id for token in step.draft[:num_drafts]]
            labels = [True] * (len(chunk) - num_drafts) + [i < len(kept) and kept[i] for i in range(num_drafts)]
            rows = self.rows[name] + list(zip(chunk, labels))
            if self.mode == "truncate":
                rows = [row for row in rows if row[1]]
            self.rows[name] = rows
            stale = sum(not is_text for _, is_text in rows)
            # the record: lengths, what was removed, what was left
            assert record.after_cutoff == kv.length == len(rows), name
            assert record.stale == stale == kv.num_stale, name
            assert record.num_text == record.after_cutoff - record.stale == len(rows) - stale
            assert record.after_cutoff == record.after_forward - record.cutoff
            assert record.cutoff == (num_drafts - sum(labels[len(labels) - num_drafts:]) if self.mode == "truncate"
                                     else 0)
            if previous is not None:
                assert record.before == (previous.kv_target if name == "target" else previous.kv_draft).after_cutoff
            # the text rows are the committed text, in order: the committed-text-derived length
            text = [token for token, is_text in rows if is_text]
            if name == "target":
                assert text == committed[:len(committed) - (step.emitted[-1].kind != "accepted")]
            else:
                if step.k > 0:
                    self.draft_text_len = step.context_len + min(sum(kept), step.k - 1)
                    if sum(kept) == step.k and not self.generation.config.carryover:
                        self.skipped.add(step.context_len + step.k - 1)
                assert text == [t for i, t in enumerate(committed[:self.draft_text_len]) if i not in self.skipped]
            # the cache's contents
            model = self.generation.pair.target if name == "target" else self.generation.pair.draft
            if self.mode == "truncate":
                assert stale == 0
                assert_cache_equals_prefill(kv, model, text)
            elif self.mode == "none":
                assert_cache_equals_prefill(kv, model, [token for token, _ in rows])
            else:               # zero in every layer (a <pad> row is zero in the first layer only: zero embedding)
                zero = torch.ones(kv.length, dtype=torch.bool)
                for keys, values in kv.key_values():                             # (1, heads, length, head_dim)
                    zero &= (keys.abs().sum(dim=(0, 1, 3)) == 0) & (values.abs().sum(dim=(0, 1, 3)) == 0)
                assert zero.tolist() == [not is_text for _, is_text in rows]
        drift = cache_drift(self.generation.trace())[-1]
        assert drift[0] == step.kv_target.stale                              # the target never misses a position
        if "draft" in self.caches:
            assert drift[1] == step.kv_draft.stale - len(self.skipped & set(range(self.draft_text_len)))


RUNS = [("model", True, 0.0), ("model", False, 0.0), ("model", True, 1.0), ("model", False, 1.0),
        ("ngram", True, 0.0), ("ngram", True, 1.0)]


@pytest.mark.parametrize("cutoff_mode", CUTOFF_MODES)
@pytest.mark.parametrize("drafter, carryover, temperature", RUNS)
def test_kv_records_match_what_each_cache_holds(pair, monkeypatch, cutoff_mode, drafter, carryover, temperature):
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=4, drafter=drafter, carryover=carryover, cutoff_mode=cutoff_mode, temperature=temperature,
                        max_new_tokens=40, seed=5)
    generation = engine.start("abcabc abcabc the cache must match the cache", config)
    CacheWitness(generation, monkeypatch).run()
    trace = generation.trace()
    assert any(s.num_kept < s.k for s in trace.steps)                       # rejections happened
    final = trace.steps[-1]
    if cutoff_mode == "truncate":
        assert all(s.kv_target.stale == 0 for s in trace.steps)
    else:                                                                   # stale positions only grow
        assert final.kv_target.stale == sum(s.k - s.num_kept for s in trace.steps) > 0
        assert all(s.kv_target.cutoff == 0 for s in trace.steps)
    if drafter == "model" and not carryover:
        assert any(s.k and s.num_kept == s.k for s in trace.steps[:-1])      # a d_k was skipped
    assert Trace.from_json(trace.to_json()) == trace


@pytest.mark.parametrize("cutoff_mode", CUTOFF_MODES)
def test_drafts_after_an_eos_are_not_kept_in_either_cache(monkeypatch, cutoff_mode):
    pair, expected = eos_pair_at(6)     # step 1 accepts all 4 drafts; EOS is d2, so d3 and d4 follow it
    generation = SpeculativeEngine(pair).start("stop here", SpecConfig(k=4, max_new_tokens=20, cutoff_mode=cutoff_mode))
    CacheWitness(generation, monkeypatch).run()
    last = generation.records[-1]
    assert list(generation.committed[-len(expected):]) == list(expected)
    assert last.eos and last.num_accepted == 4 and last.num_kept == 2
    target, draft = last.kv_target, last.kv_draft
    assert target.num_text == len(generation.committed)                    # the EOS (a draft it fed) is text
    assert draft.num_text == len(generation.committed)                      # d2 too: the draft fed d1..d3
    if cutoff_mode == "truncate":
        assert (target.cutoff, target.stale, draft.cutoff, draft.stale) == (2, 0, 1, 0)
    else:
        assert (target.cutoff, target.stale, draft.cutoff, draft.stale) == (0, 2, 0, 1)


class ScriptedDrafter:
    """Proposes fixed token lists, one per step: isolates the engine from a draft model."""

    def __init__(self, script: list[list[int]]):
        self.script = list(script)

    def propose(self, committed: list[int], k: int) -> Proposal:
        return Proposal(self.script.pop(0)[:k] if self.script else [], None)

    def on_verified(self, proposal: Proposal, num_kept: int) -> None:
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
    assert summary.verify_steps == 3 and summary.undrafted_steps == 4     # the single steps drafted nothing
    assert summary.mean_accepted_length == pytest.approx(8 / 3)          # τ counts the steps that verified drafts
    # position 0: reached in all 3 steps, accepted in 2; position 1: steps 0 and 2, both accepted;
    # position 2: steps 0 (accepted) and 2 (rejected); position 3: never reached (step 2 rejected at 2)
    assert summary.per_position_acceptance == pytest.approx((2 / 3, 1.0, 1 / 2, None))
    assert summary.accepted_length_histogram[:4] == (1, 0, 1, 1)
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
