"""Logits -> probabilities: temperature, top-k and top-p, applied identically to
draft and target so the acceptance rule compares like with like."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0     # 0 = greedy: probabilities are the plain softmax, choices are argmax
    top_k: int = 0               # 0 = off
    top_p: float = 1.0           # 1 = off

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0


def to_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """(..., V) logits -> (..., V) float32 probabilities after temperature/top-k/top-p.

    In greedy mode this is the untempered softmax, used only for display and for
    the overlap estimate; the choice itself is the argmax of the logits.
    """
    logits = logits.float()
    if params.is_greedy:
        return torch.softmax(logits, dim=-1)
    logits = logits / params.temperature
    if params.top_k > 0 and params.top_k < logits.shape[-1]:
        kth_value = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]   # (..., 1)
        logits = logits.masked_fill(logits < kth_value, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        probs = _nucleus(probs, params.top_p)
    return probs


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p, renormalised."""
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs      # mass of strictly more likely tokens
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)  # the first token always survives
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


def choose(logits: torch.Tensor, probs: torch.Tensor, params: SamplingParams,
           generator: torch.Generator | None) -> torch.Tensor:
    """Pick one token from a (V,) distribution: argmax when greedy, else a seeded sample. The
    (1,) result stays on the device: it can be fed to the next forward without a host sync."""
    if params.is_greedy:
        return torch.argmax(logits).view(1)
    return draw(probs, generator)


def draw(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token drawn from the (V,) law `probs` (weights >= 0 with a positive sum, not necessarily normalised),
    seeded by `generator`: (1,), on probs' device, read by nothing on the host.

    On a CPU by inverting the law's cumulative sum, in float64, at one uniform: torch.multinomial draws an
    exponential for every entry of the vocabulary (3.85 ms a draw at Qwen's 151,936 on a 2-core EPYC, against 0.10 ms
    for the softmax before it and 1.18 ms for this, most of it first touching the sums' fresh pages:
    benchmarks/data/cpu-draw-2026-11-30.txt), and a step draws up to k + 1 times; it also reads its own check back
    on the host. float64 keeps each token's interval within about 1e-16 of its probability
    (float32's rounding near a sum of 1 would move the tokens below 1e-7 by whole units of it). A token of
    probability 0 has an empty interval and is never drawn; the uniform is below 1, and its product with the sum
    rounds to below the sum, so the draw lands on a token with probability. On other devices torch.multinomial."""
    if probs.device.type != "cpu":
        return torch.multinomial(probs, 1, generator=generator)
    cumulative = probs.double().cumsum(-1)
    point = torch.rand(probs.shape[:-1] + (1,), dtype=torch.float64, generator=generator) * cumulative[..., -1:]
    return torch.searchsorted(cumulative, point, right=True)
