"""Token trees sample losslessly: over 1500 seeded runs the joint law of the first three
generated tokens is the exact law of target-only sampling (tests/oracles.py), with steps that
accept a later child after rejecting earlier ones and steps that reject every child of a node.
The walk itself is checked on a hand-made tree: the first token's law is p exactly."""

from __future__ import annotations

import pytest
import torch

from engine.decode.speculative import SpeculativeEngine
from engine.decode.tree.accept import walk_greedy, walk_sampling
from oracles import TREE_LAW_CASES, assert_follows_target_law, chi_square, law_pair

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


@pytest.fixture(scope="module")
def engine() -> SpeculativeEngine:
    return SpeculativeEngine(law_pair(), detailed_trace=False)


@pytest.mark.parametrize("case", TREE_LAW_CASES, ids=str)
def test_tree_first_tokens_follow_the_target_law(engine, case):
    exercised = assert_follows_target_law(engine, case).exercised
    often = case.runs // 20
    assert exercised.multi_step_runs > often
    assert exercised.later_children > often            # a candidate accepted after a sibling was rejected
    assert exercised.all_rejected > often               # the token drawn from p minus the tried candidates
    assert exercised.bonus_tokens > often // 4          # a leaf reached: the bonus from the leaf's own row


def test_the_walk_draws_the_first_token_from_p():
    """Root with three candidates, then a token: its law must be p whichever candidates are tried."""
    p = torch.tensor([0.05, 0.4, 0.3, 0.2, 0.05])
    children = [[0, 1, 2], [], [], []]
    tokens = [1, 3, 4]                                                  # candidates of p = .4, .2, .05
    generator = torch.Generator().manual_seed(0)
    counts = {}
    for _ in range(20000):
        walk = walk_sampling(children, tokens, torch.stack([p] * 4), generator)
        first = tokens[walk.path[0]] if walk.path else walk.next_token
        counts[(first,)] = counts.get((first,), 0) + 1
    law = {(token,): float(mass) for token, mass in enumerate(p)}
    statistic, dof, p_value = chi_square(counts, law)
    assert p_value > 1e-4, (statistic, dof, counts)


def test_the_greedy_walk_follows_the_target_argmax():
    # root -> {0: 'x', 1: 'y'}; node 1 -> {2: 'z'}; the target picks y, then z, then w
    children = [[0, 1], [], [2], []]
    tokens = [10, 11, 12]
    walk = walk_greedy(children, tokens, choices=[11, 99, 12, 13])
    assert walk.path == (1, 2) and walk.next_token == 13 and walk.next_kind == "bonus"
    assert walk.verdicts == ("rejected", "accepted", "accepted") and walk.stop_rejected is None
    walk = walk_greedy(children, tokens, choices=[11, 99, 7, 13])
    assert walk.path == (1,) and walk.next_token == 7 and walk.next_kind == "recovered" and walk.stop_rejected == 2
