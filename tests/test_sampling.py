"""Temperature, top-k and top-p processing of logits."""

from __future__ import annotations

import math

import pytest
import torch

from engine.decode.sampling import SamplingParams, to_probs

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
