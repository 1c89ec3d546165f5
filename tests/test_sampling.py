"""Temperature, top-k and top-p processing of logits."""

from __future__ import annotations

import math

import pytest
import torch

from engine.decode.sampling import SamplingParams, draw, to_probs

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


def test_greedy_probabilities_are_the_plain_softmax():
    logits = torch.tensor([1.0, 2.0, 3.0])
    assert torch.allclose(to_probs(logits, SamplingParams(0.0)), torch.softmax(logits, -1))


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([1.0, 2.0, 3.0])
    cold = to_probs(logits, SamplingParams(0.5))
    hot = to_probs(logits, SamplingParams(2.0))
    assert cold[2] > torch.softmax(logits, -1)[2] > hot[2]
    assert math.isclose(float(cold.sum()), 1.0, rel_tol=1e-6)


def test_top_k_keeps_k_tokens():
    probs = to_probs(torch.tensor([1.0, 4.0, 3.0, 2.0]), SamplingParams(1.0, top_k=2))
    assert (probs > 0).tolist() == [False, True, True, False]
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)


def test_top_p_keeps_the_smallest_set_reaching_the_mass():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    probs = to_probs(logits, SamplingParams(1.0, top_p=0.8))
    assert (probs > 0).tolist() == [True, True, False, False]
    assert torch.allclose(probs, torch.tensor([0.625, 0.375, 0.0, 0.0]), atol=1e-6)


def test_top_p_always_keeps_the_most_likely_token():
    probs = to_probs(torch.tensor([5.0, 1.0, 0.0]), SamplingParams(1.0, top_p=0.01))
    assert probs.tolist() == [1.0, 0.0, 0.0]


def test_processing_works_on_batches():
    logits = torch.randn(3, 10, generator=torch.Generator().manual_seed(0))
    probs = to_probs(logits, SamplingParams(0.7, top_k=5, top_p=0.9))
    assert probs.shape == (3, 10)
    assert torch.allclose(probs.sum(-1), torch.ones(3))
    assert ((probs > 0).sum(-1) <= 5).all()


def test_a_draw_follows_its_law_and_never_picks_a_token_of_probability_zero():
    """The CPU's inverse-CDF draw (sampling.draw) against its law, unnormalised weights: 100,000 seeded draws,
    each frequency within 0.01 of its probability (6 standard errors or more), and none of an impossible token."""
    weights = torch.tensor([0.0, 1.5, 0.0, 0.75, 0.75, 0.0])
    generator = torch.Generator().manual_seed(0)
    tokens = torch.cat([draw(weights, generator) for _ in range(100_000)])
    frequencies = torch.bincount(tokens, minlength=6).double() / tokens.numel()
    assert frequencies[[0, 2, 5]].tolist() == [0.0, 0.0, 0.0]
    assert torch.allclose(frequencies, (weights / weights.sum()).double(), atol=0.01), frequencies.tolist()


@pytest.mark.parametrize("total", [1.0, 3.0, 0.7, 2.0 ** -20])
@pytest.mark.parametrize("uniform, token", [(0.0, 1), (1.0 - 2.0 ** -53, 3)], ids=["smallest", "largest"])
def test_the_extreme_uniforms_land_on_tokens_of_the_law(monkeypatch, total, uniform, token):
    """At a uniform of 0 the draw is the first token with probability, not a leading one of probability zero;
    at the largest double below 1 the point rounds to below the law's sum, and the draw is the last token with
    probability, not one past the end nor a trailing token of probability zero."""
    weights = torch.tensor([0.0, 0.25, 0.0, 0.75, 0.0, 0.0], dtype=torch.float64) * total
    monkeypatch.setattr(torch, "rand", lambda *size, **options: torch.full(size[0], uniform, dtype=torch.float64))
    assert draw(weights, None).tolist() == [token]


def test_a_draw_stays_on_the_host_and_reads_nothing_back():
    """What the step's single readout relies on (engine/decode/readout.py): no Python-level read of a tensor."""
    from engine.decode.readout import HostReads
    probs = torch.softmax(torch.randn(1000), -1)
    with HostReads() as counter:
        token = draw(probs, torch.Generator().manual_seed(1))
    assert counter.reads == [] and token.shape == (1,) and token.dtype == torch.int64
