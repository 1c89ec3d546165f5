"""The acceptance rule on hand-made distributions: greedy prefix match and the
lossless sampling rule (accept with min(1, p/q), residual, bonus)."""

from __future__ import annotations

import pytest
import torch

from engine.decode.verify import accept_greedy, accept_sampling, residual_distribution

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


def one_hot_logits(choices: list[int], vocab: int = 6) -> torch.Tensor:
    logits = torch.full((len(choices), vocab), -5.0)
    logits[torch.arange(len(choices)), torch.tensor(choices)] = 5.0
    return logits


def test_greedy_accepts_the_matching_prefix_and_recovers_the_target_choice():
    result = accept_greedy([2, 3, 4], one_hot_logits([2, 3, 1, 5]))
    assert result.num_accepted == 2
    assert (result.next_token, result.next_kind) == (1, "recovered")
    assert result.accept_probs is None and result.draws is None


def test_greedy_all_accepted_gives_the_bonus_token():
    result = accept_greedy([2, 3], one_hot_logits([2, 3, 5]))
    assert (result.num_accepted, result.next_token, result.next_kind) == (2, 5, "bonus")


def test_greedy_with_no_drafts_is_a_plain_target_step():
    result = accept_greedy([], one_hot_logits([4]))
    assert (result.num_accepted, result.next_token, result.next_kind) == (0, 4, "bonus")


def test_sampling_accepts_when_target_is_at_least_as_likely():
    target = torch.tensor([[0.1, 0.9], [0.5, 0.5], [0.3, 0.7]])
    draft = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    result = accept_sampling([1, 0], draft, target, torch.Generator().manual_seed(0))
    assert result.accept_probs == (1.0, 1.0)
    assert result.num_accepted == 2 and result.next_kind == "bonus"
    assert all(draw is not None for draw in result.draws)


def test_sampling_never_accepts_a_token_the_target_rules_out():
    target = torch.tensor([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    draft = torch.tensor([[0.0, 1.0, 0.0]])
    for seed in range(20):
        result = accept_sampling([1], draft, target, torch.Generator().manual_seed(seed))
        assert result.num_accepted == 0 and result.accept_probs == (0.0,)
        assert (result.next_token, result.next_kind) == (0, "recovered")      # residual is all on token 0


def test_rejection_rate_matches_one_minus_p_over_q():
    target = torch.tensor([[0.3, 0.7], [0.5, 0.5]])
    draft = torch.tensor([[0.6, 0.4]])
    generator = torch.Generator().manual_seed(1)
    accepted = sum(accept_sampling([0], draft, target, generator).num_accepted for _ in range(4000))
    assert abs(accepted / 4000 - 0.5) < 0.03                                 # min(1, 0.3/0.6) = 0.5


def test_residual_is_the_normalised_positive_part():
    residual = residual_distribution(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.1, 0.6, 0.3]), 1)
    assert torch.allclose(residual, torch.tensor([1.0, 0.0, 0.0]))


def test_point_mass_residual_removes_the_draft_token():
    residual = residual_distribution(torch.tensor([0.5, 0.25, 0.25]), None, 0)
    assert torch.allclose(residual, torch.tensor([0.0, 0.5, 0.5]))


def test_draws_stop_after_the_first_rejection():
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5], [0.5, 0.5]])
    draft = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    result = accept_sampling([0, 0], draft, target, torch.Generator().manual_seed(0))
    assert result.num_accepted == 0
    assert result.draws[0] is not None and result.draws[1] is None


def test_bonus_is_drawn_from_the_row_after_the_last_draft():
    target = torch.eye(4)[:3]                         # p_1, p_2, p_3: one-hot on tokens 0, 1, 2
    result = accept_sampling([0, 1], target[:2], target, torch.Generator().manual_seed(0))
    assert (result.num_accepted, result.next_token, result.next_kind) == (2, 2, "bonus")


def test_a_rejection_at_position_1_resamples_from_the_residual_of_row_1():
    target = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    draft = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    result = accept_sampling([0, 1], draft, target, torch.Generator().manual_seed(0))
    assert result.num_accepted == 1 and (result.next_token, result.next_kind) == (2, "recovered")
    assert torch.equal(result.residual, torch.tensor([0.0, 0.0, 1.0, 0.0]))
