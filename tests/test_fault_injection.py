"""The tests are tested: each bug an engine oracle exists for is planted with monkeypatch at
the engine's real seams, and that oracle, run as its own test runs it, must report it.

A planted bug that survives is a missing oracle. The oracles (tests/oracles.py) are the
joint law of the first tokens against target-only sampling (test_engine_lossless.py),
identity with target-only greedy decoding (test_engine_greedy.py) and each cache against
a fresh prefill after every step (test_engine_cache.py).
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import engine.decode.drafters
import engine.decode.generation
import engine.decode.tree.accept
import engine.decode.tree.step
import engine.decode.verify
from engine.config import SpecConfig
from engine.decode.drafters import ModelDrafter, Proposal
from engine.decode.speculative import SpeculativeEngine
from engine.decode.generation import Generation
from engine.decode.kv import KVCache
from engine.decode.tree.mask import tree_positions
from engine.decode.tree.shape import DraftTree
from engine.loading.tiny import build_tiny_pair
from engine.decode.verify import Decision, decide_greedy, residual_distribution
from engine.runtime.static_cache import StaticKV, additive
from engine.runtime.static_runner import StaticRunner
from oracles import (CACHE_PROMPT, GREEDY_PROMPTS, LAW_CASES, TREE_LAW_CASES, assert_caches_match_prefill_every_step,
                     assert_follows_target_law, assert_identical_to_target_only,
                     assert_static_matches_dynamic_target_only, law_pair, replaying_graphs)

K2_OVER_5, K3, NGRAM = LAW_CASES
next_token_distribution = engine.decode.verify.next_token_distribution


# -- the oracles, as their tests run them ---------------------------------------------------------

def law_oracle(case) -> Callable[[], object]:
    return lambda: assert_follows_target_law(SpeculativeEngine(law_pair(), detailed_trace=False), case)


def greedy_oracle() -> None:
    """test_noisy_draft_matches_target_only at k = 3 (its noisy pair is seed 0)."""
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    for prompt in GREEDY_PROMPTS:
        assert_identical_to_target_only(engine, prompt, SpecConfig(k=3, max_new_tokens=24))


def cache_oracle() -> None:
    """test_caches_equal_a_fresh_prefill_after_every_step at k = 3, sampling (its pair is seed 3)."""
    assert_caches_match_prefill_every_step(SpeculativeEngine(build_tiny_pair(seed=3)), CACHE_PROMPT,
                                           SpecConfig(k=3, temperature=1.0, max_new_tokens=30, seed=2))


def static_greedy_oracle() -> None:
    """test_static_greedy_matches_target_only_on_a_dynamic_cache at k = 4, graphs replayed eagerly."""
    engine = SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0)))
    for prompt in GREEDY_PROMPTS:
        assert_static_matches_dynamic_target_only(engine, prompt, SpecConfig(k=4, max_new_tokens=24))


def static_cache_oracle() -> None:
    """test_static_caches_equal_a_fresh_prefill_after_every_rollback at k = 3, greedy."""
    assert_caches_match_prefill_every_step(SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0))),
                                           "Speculative decoding is",
                                           SpecConfig(k=3, max_new_tokens=30, seed=2, cache="static"))


def static_tree_oracle() -> None:
    """test_static_trees_and_adaptive_match on the 16-node tree."""
    engine = SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0)))
    for prompt in GREEDY_PROMPTS[:6]:
        assert_static_matches_dynamic_target_only(engine, prompt,
                                                  SpecConfig(k=5, tree_nodes=16, tree_branch=3, max_new_tokens=24))


def tree_greedy_oracle() -> None:
    """test_tree_matches_target_only at 16 nodes, branch 3, depth 5 (its pair is seed 0)."""
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    for prompt in GREEDY_PROMPTS:
        assert_identical_to_target_only(engine, prompt, SpecConfig(k=5, tree_nodes=16, tree_branch=3, max_new_tokens=24))


def tree_cache_oracle() -> None:
    """test_tree_caches_equal_a_fresh_prefill_after_every_step at 6 nodes, branch 2, greedy."""
    assert_caches_match_prefill_every_step(SpeculativeEngine(build_tiny_pair(seed=3, draft_noise=0.05)), CACHE_PROMPT,
                                           SpecConfig(k=4, tree_nodes=6, tree_branch=2, max_new_tokens=30, seed=2))


# -- the bugs ------------------------------------------------------------------------------------

def residual_from_the_previous_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rejection at draft position i >= 1 draws from the residual of row i - 1."""
    def planted(drafts: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                num_accepted: torch.Tensor) -> torch.Tensor:
        correct = next_token_distribution(drafts, draft_probs, target_probs, num_accepted)
        if drafts.shape[0] == 0:
            return correct
        row = torch.clamp(num_accepted - 1, min=0).view(1)
        wrong = residual_distribution(target_probs.index_select(0, row)[0],
                                      draft_probs.index_select(0, row)[0] if draft_probs is not None else None,
                                      drafts.index_select(0, row))
        return torch.where(num_accepted == drafts.shape[0], correct, wrong)
    monkeypatch.setattr(engine.decode.verify, "next_token_distribution", planted)


def residual_is_the_target_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rejection draws from p instead of norm(max(0, p - q))."""
    monkeypatch.setattr(engine.decode.verify, "residual_distribution", lambda target_row, draft_row, draft_id: target_row)


def accept_every_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.decode.verify, "acceptance_probabilities",
                        lambda p_of_draft, q_of_draft: torch.ones_like(p_of_draft))


def accept_with_q_over_p(monkeypatch: pytest.MonkeyPatch) -> None:
    """min(1, q/p): the ratio upside down."""
    monkeypatch.setattr(engine.decode.verify, "acceptance_probabilities",
                        lambda p_of_draft, q_of_draft: torch.clamp(q_of_draft / p_of_draft, max=1.0))


def bonus_from_the_last_draft_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """All k accepted, the bonus is drawn from p_k (the row that verified d_k) instead of p_{k+1}."""
    def planted(drafts: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                num_accepted: torch.Tensor) -> torch.Tensor:
        correct = next_token_distribution(drafts, draft_probs, target_probs, num_accepted)
        k = drafts.shape[0]
        return torch.where(num_accepted == k, target_probs[k - 1], correct) if k else correct
    monkeypatch.setattr(engine.decode.verify, "next_token_distribution", planted)


def carryover_without_the_last_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a fully accepted step the draft counts d_k as fed and is given only the bonus."""
    on_verified = ModelDrafter.on_verified

    def planted(self: ModelDrafter, proposal: Proposal, num_kept: int):
        lengths = on_verified(self, proposal, num_kept)
        if proposal.token_ids and num_kept == len(proposal.token_ids):
            self.kv.commit(1)
        return lengths
    monkeypatch.setattr(ModelDrafter, "on_verified", planted)


class CutsOneFewer(KVCache):
    def cutoff(self, num_tokens: int, *args, **kwargs) -> int:
        return super().cutoff(num_tokens - 1, *args, **kwargs)


class CutsOneMore(KVCache):
    def cutoff(self, num_tokens: int, *args, **kwargs) -> int:
        return super().cutoff(num_tokens + 1, *args, **kwargs)


def cache_of_role(monkeypatch: pytest.MonkeyPatch, role: str, kind: type[KVCache]) -> None:
    """Generation.cache_for builds every cache of a run: make the cache of `role` a `kind`."""
    cache_for = Generation.cache_for

    def planted(self: Generation, model, which: str) -> KVCache:
        cache = cache_for(self, model, which)
        if which == role:
            cache.__class__ = kind
        return cache
    monkeypatch.setattr(Generation, "cache_for", planted)


def target_cut_one_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """The target keeps its first rejected position."""
    cache_of_role(monkeypatch, "target", CutsOneFewer)


def draft_cut_one_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """The draft cuts one position too many."""
    cache_of_role(monkeypatch, "draft", CutsOneMore)


def greedy_compares_with_the_draft_argmax(monkeypatch: pytest.MonkeyPatch) -> None:
    """Greedy verification checks each draft against the draft's own argmax, not the target's."""
    decide = Generation._decide

    def planted(self: Generation, drafts: torch.Tensor, proposal: Proposal, verification) -> Decision:
        if not self.params.is_greedy or proposal.probs is None:
            return decide(self, drafts, proposal, verification)
        k = drafts.shape[0]
        return decide_greedy(drafts, torch.cat([proposal.probs, verification.probs[k:]]))   # (k+1, V)
    monkeypatch.setattr(Generation, "_decide", planted)


def tree_node_sees_a_non_ancestor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verify mask is causal over the nodes: each node also sees earlier siblings and cousins."""
    monkeypatch.setattr(DraftTree, "ancestry", lambda self: torch.ones(self.size, self.size, dtype=torch.bool).tril())


def tree_positions_of_a_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each node at the next free position (its index in the forward), not context_len + depth - 1."""
    def planted(start: int, num_pending: int, depths: list[int], device: torch.device) -> torch.Tensor:
        return tree_positions(start, num_pending + len(depths), [], device)
    monkeypatch.setattr(engine.decode.tree.step, "tree_positions", planted)


def tree_gathers_the_first_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps the first len(path) node rows (a chain's cutoff) instead of the path's rows."""
    gather = KVCache.gather
    monkeypatch.setattr(KVCache, "gather", lambda self, start, kept: gather(self, start, list(range(len(kept)))))


def tree_rejection_keeps_the_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rejected candidate stays in p: the next trial and the final draw can pick it again."""
    monkeypatch.setattr(engine.decode.tree.accept, "residual_distribution",
                        lambda target_row, draft_row, draft_id: target_row)


def tree_accepts_with_p_over_q(monkeypatch: pytest.MonkeyPatch) -> None:
    """A top-b candidate treated as if drawn from q: accepted with min(1, p/q) instead of p."""
    walk = engine.decode.tree.accept.walk_sampling
    step_walk = engine.decode.tree.step.TreeStep._walk

    def planted(tree, logits, target_probs, generation):
        if generation.params.is_greedy:
            return step_walk(tree, logits, target_probs, generation)
        scaled = target_probs.clone()
        for node, parent in enumerate(tree.parents):      # p / q at each candidate, so p(x) -> p(x) / q(x)
            row = scaled[parent + 1]
            row[tree.tokens[node]] = min(1.0, float(row[tree.tokens[node]]) / tree.q[node])
        return walk(tree.children(), tree.tokens, scaled, generation.generator)
    monkeypatch.setattr(engine.decode.tree.step.TreeStep, "_walk", staticmethod(planted))


def static_pointer_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollback moves the device write pointers one row short of where the host puts the length."""
    move_pointer = StaticKV.move_pointer

    def planted(self: StaticKV, length: int) -> None:
        rolled_back = length < self.length
        move_pointer(self, length)
        if rolled_back:
            with torch.inference_mode():
                for layer in self.layers:
                    layer.cumulative_length.fill_(length + 1)
    monkeypatch.setattr(StaticKV, "move_pointer", planted)


def static_stale_row_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mask lets each row see one row past its position: a cut draft's keys, or an unwritten row."""
    monkeypatch.setattr(StaticKV, "causal_mask", lambda self, positions: additive(
        self.columns[None, :] <= positions[0, :, None] + 1, self.dtype)[None, None])


def static_tree_mask_padding_shows_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree's mask widened to the capacity leaves the first column past the tree visible."""
    padded_mask = StaticKV.padded_mask

    def planted(self: StaticKV, mask: torch.Tensor) -> torch.Tensor:
        padded = padded_mask(self, mask)
        padded[..., mask.shape[-1]] = 0.0
        return padded
    monkeypatch.setattr(StaticKV, "padded_mask", planted)


def graph_of_the_wrong_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forward of T rows replays the graph captured for T + 1 (its last input row left as it was):
    the device pointer moves one row further than the host counts."""
    forward = StaticRunner.forward

    def planted(self: StaticRunner, input_ids: torch.Tensor, num_logits: int, positions=None, mask=None):
        rows = input_ids.shape[-1]
        graph = self.graphs.get(rows + 1)
        if graph is None or positions is not None or mask is not None:
            return forward(self, input_ids, num_logits, positions, mask)
        start = self.kv.length
        graph.input_ids[:, :rows].copy_(input_ids.view(1, rows))
        graph.positions.copy_(self.kv.columns[start:start + rows + 1][None])
        logits = graph.replay()[:rows][-num_logits:]
        self.kv.advance(rows)
        return logits
    monkeypatch.setattr(StaticRunner, "forward", planted)


BUGS = [
    pytest.param(residual_from_the_previous_row, law_oracle(K2_OVER_5), id="residual-from-the-wrong-row"),
    pytest.param(residual_is_the_target_row, law_oracle(K3), id="residual-is-p"),
    pytest.param(accept_every_draft, law_oracle(K2_OVER_5), id="accept-every-draft"),
    pytest.param(accept_with_q_over_p, law_oracle(K3), id="accept-with-q-over-p"),
    pytest.param(bonus_from_the_last_draft_row, law_oracle(NGRAM), id="bonus-from-the-last-draft-row"),
    pytest.param(carryover_without_the_last_draft, cache_oracle, id="carryover-without-d_k"),
    pytest.param(target_cut_one_short, cache_oracle, id="target-cut-off-by-one"),
    pytest.param(draft_cut_one_more, cache_oracle, id="draft-cut-off-by-one"),
    pytest.param(greedy_compares_with_the_draft_argmax, greedy_oracle, id="greedy-compares-with-the-draft-argmax"),
    pytest.param(tree_node_sees_a_non_ancestor, tree_cache_oracle, id="tree-node-sees-a-non-ancestor"),
    pytest.param(tree_node_sees_a_non_ancestor, tree_greedy_oracle, id="tree-node-sees-a-non-ancestor-greedy"),
    pytest.param(tree_positions_of_a_chain, tree_cache_oracle, id="tree-wrong-position-ids"),
    pytest.param(tree_gathers_the_first_rows, tree_cache_oracle, id="tree-gathers-the-wrong-rows"),
    pytest.param(tree_rejection_keeps_the_candidate, law_oracle(TREE_LAW_CASES[0]), id="tree-rejection-keeps-the-candidate"),
    pytest.param(tree_accepts_with_p_over_q, law_oracle(TREE_LAW_CASES[0]), id="tree-accepts-with-p-over-q"),
    pytest.param(static_pointer_off_by_one, static_cache_oracle, id="static-pointer-off-by-one"),
    pytest.param(static_pointer_off_by_one, static_greedy_oracle, id="static-pointer-off-by-one-greedy"),
    pytest.param(static_stale_row_visible, static_greedy_oracle, id="static-stale-row-visible"),
    pytest.param(static_tree_mask_padding_shows_a_row, static_tree_oracle, id="static-tree-mask-shows-a-row"),
    pytest.param(graph_of_the_wrong_k, static_greedy_oracle, id="graph-replayed-with-the-wrong-k"),
]


@pytest.mark.parametrize("plant, oracle", BUGS)
def test_the_oracle_reports_the_planted_bug(monkeypatch, plant, oracle):
    plant(monkeypatch)
    with pytest.raises(AssertionError):
        oracle()
