"""The 4D ancestor mask against the per-branch oracle: one verify forward over a whole token
tree gives, at every node, the logits of decoding that node's branch on its own (and the draft
model's level-by-level forwards the same), with SDPA and eager attention, on the tiny models
and (real_models) on the real qwen-coder target."""

from __future__ import annotations

import pytest
import torch

from engine.decode.kv import KVCache
from engine.decode.tree.mask import tree_positions, verify_mask
from engine.decode.tree.shape import ROOT, DraftTree
from engine.decode.tree.draft import TreeDrafter
from engine.decode.sampling import SamplingParams
from engine.loading.tiny import build_tiny_pair
from engine.runtime.static_runner import PoolSettings, RunnerPool

# root -> 0, 1, 2; 0 -> 3, 4; 1 -> 5; 3 -> 6; 5 -> 7: siblings, cousins and unequal depths
PARENTS = [ROOT, ROOT, ROOT, 0, 0, 1, 3, 5]
DEPTHS = [1, 1, 1, 2, 2, 2, 3, 3]


def tree_of(tokens: list[int]) -> DraftTree:
    return DraftTree(tokens, PARENTS, DEPTHS, [1.0] * len(tokens), {}, None, [])


def branch_logits(model, token_ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([token_ids])).logits[0, -1].float()


def assert_each_node_matches_its_branch(model, context: list[int], tokens: list[int], num_pending: int,
                                        tolerance: float, cache: str = "dynamic") -> None:
    tree = tree_of(tokens)
    kv = KVCache(model) if cache == "dynamic" else KVCache(model, None, RunnerPool(model, PoolSettings()), rows=64)
    with torch.inference_mode():
        kv.forward(context[:-num_pending], num_logits=1)
        past = kv.length
        result = kv.forward(context[-num_pending:] + tokens, num_logits=len(tokens) + 1,
                            position_ids=tree_positions(past, num_pending, DEPTHS, kv.device),
                            attention_mask=verify_mask(past, num_pending, tree.ancestry(), kv.dtype, kv.device))
    assert torch.allclose(result.logits[0], branch_logits(model, context), atol=tolerance)
    for node in range(len(tokens)):
        branch = context + [tokens[n] for n in tree.line(node)]
        error = (result.logits[node + 1] - branch_logits(model, branch)).abs().max()
        assert error < tolerance, (node, float(error))


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("num_pending", [1, 3])
def test_verify_mask_gives_every_node_its_branch_logits(attention, num_pending, cache):
    """A static cache widens the tree's mask to its capacity (the rows past the pointer hidden)."""
    model = build_tiny_pair(seed=5).target
    model.config._attn_implementation = attention
    assert_each_node_matches_its_branch(model, [1, 40, 41, 42, 43, 44], [50, 51, 52, 53, 54, 55, 56, 57],
                                        num_pending, tolerance=1e-4, cache=cache)


def test_a_wrong_mask_is_caught_by_the_branch_oracle(monkeypatch):
    """The oracle's own check: a causal mask (each node sees every earlier node) must fail it."""
    monkeypatch.setattr(DraftTree, "ancestry", lambda self: torch.ones(self.size, self.size, dtype=torch.bool).tril())
    with pytest.raises(AssertionError):
        assert_each_node_matches_its_branch(build_tiny_pair(seed=5).target, [1, 40, 41, 42],
                                            [50, 51, 52, 53, 54, 55, 56, 57], 1, tolerance=1e-4)


def test_the_drafters_level_forwards_match_each_branch_decoded_alone():
    pair = build_tiny_pair(seed=6)
    drafter = TreeDrafter(KVCache(pair.draft, pair.vocab_size), SamplingParams(), prompt_len=4, branch=3)
    committed = [1, 40, 41, 42]
    with torch.inference_mode():
        tree = drafter.propose(committed, depth=4, budget=20)
    assert tree.size == 20 and max(tree.depths) == 4
    for node, row in tree.draft_rows.items():
        branch = committed + ([tree.tokens[n] for n in tree.line(node)] if node != ROOT else [])
        want = torch.softmax(branch_logits(pair.draft, branch), dim=-1)
        assert torch.allclose(tree.draft_probs[row], want, atol=1e-5), node
    for node in range(tree.size):     # each node's q is its parent's law at its token
        assert abs(tree.q[node] - float(tree.draft_probs[tree.draft_rows[tree.parents[node]], tree.tokens[node]])) < 1e-6


@pytest.mark.real_models
def test_verify_mask_on_the_real_qwen_coder_target():
    from engine.loading.models import load_pair
    pair = load_pair("qwen-coder")
    context = pair.encode_prompt("def add(a, b):")
    tokens = pair.tokenizer.encode(" return a + b\n  x y z")[:len(PARENTS)]
    assert len(tokens) == len(PARENTS)
    assert_each_node_matches_its_branch(pair.target, context, tokens, num_pending=2, tolerance=2e-3)
