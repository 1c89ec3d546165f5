"""Token trees in greedy mode against their oracles: target-only greedy decoding over many
prompts, node budgets and branch widths; each cache against a fresh prefill of what it
committed after every step; and more tokens per target forward than a chain of the same depth
when the draft is good. tests/test_fault_injection.py plants tree bugs and sees these fail."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from oracles import (CACHE_PROMPT, GREEDY_PROMPTS, assert_caches_match_prefill_every_step,
                     assert_identical_to_target_only)

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


@pytest.fixture(scope="module")
def noisy_engine() -> SpeculativeEngine:
    return SpeculativeEngine(build_tiny_pair(seed=0))


@pytest.mark.parametrize("nodes, branch, k", [(1, 1, 4), (4, 2, 3), (16, 3, 5), (40, 4, 8), (9, 8, 2)])
def test_tree_matches_target_only(noisy_engine, nodes, branch, k):
    shapes = set()
    for prompt in GREEDY_PROMPTS:
        trace = assert_identical_to_target_only(noisy_engine, prompt, SpecConfig(
            k=k, tree_nodes=nodes, tree_branch=branch, max_new_tokens=24))
        for step in trace.steps:
            assert len(step.tree.nodes) <= nodes and all(node.depth <= k for node in step.tree.nodes)
            shapes.add((len(step.tree.nodes), max((n.depth for n in step.tree.nodes), default=0)))
            if step.tree.path:
                assert step.num_accepted == len(step.tree.path)
    if nodes > 1:
        assert any(size > depth for size, depth in shapes), "trees really branched"


def test_trees_accept_more_per_target_forward_than_a_chain_of_the_same_depth(noisy_engine):
    tree_tokens = chain_tokens = 0.0
    for prompt in GREEDY_PROMPTS:
        tree = noisy_engine.generate(prompt, SpecConfig(k=5, tree_nodes=16, tree_branch=3, max_new_tokens=32))
        chain = noisy_engine.generate(prompt, SpecConfig(k=5, max_new_tokens=32))
        tree_tokens += tree.summary.mean_accepted_length
        chain_tokens += chain.summary.mean_accepted_length
    assert tree_tokens > chain_tokens


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("nodes, branch", [(6, 2), (20, 3)])
def test_tree_caches_equal_a_fresh_prefill_after_every_step(temperature, nodes, branch):
    engine = SpeculativeEngine(build_tiny_pair(seed=3, draft_noise=0.05))   # rejections at every depth
    trace = assert_caches_match_prefill_every_step(engine, CACHE_PROMPT, SpecConfig(
        k=4, tree_nodes=nodes, tree_branch=branch, temperature=temperature, max_new_tokens=30, seed=2))
    paths = [len(step.tree.path) for step in trace.steps]
    assert max(paths) >= 2 and any(p < 4 for p in paths), "accepted paths of several lengths were gathered"
    # the accepted path is not contiguous among the nodes: the gather really moved rows
    assert any(step.tree.path and list(step.tree.path) != list(range(len(step.tree.path))) for step in trace.steps)


def test_a_tree_step_records_its_kv_arithmetic(noisy_engine):
    trace = noisy_engine.generate(GREEDY_PROMPTS[1], SpecConfig(k=4, tree_nodes=12, tree_branch=3, max_new_tokens=20))
    for step in trace.steps:
        nodes, kept = len(step.tree.nodes), step.num_kept
        pending = step.context_len - step.kv_target.before
        assert step.kv_target.after_forward - step.kv_target.before == pending + nodes
        assert step.kv_target.cutoff == nodes - kept
        assert step.kv_target.after_cutoff == step.kv_target.before + pending + kept
        if nodes:
            draft = step.kv_draft
            assert draft.after_cutoff == draft.after_forward - draft.cutoff
            assert step.context_len <= draft.after_cutoff <= step.context_len + kept
