"""The i.i.d. acceptance model: each draft is accepted with probability a, independently.

Under it the number of accepted drafts in a step with k drafts follows a truncated
geometric law, P(n) = a^n (1 - a) for n < k and P(k) = a^k, and a step emits
E = (1 - a^(k+1)) / (1 - a) tokens on average (engine.metrics.expected_tokens_per_step).
"""

from __future__ import annotations

from typing import Sequence

from engine.records import StepRecord


def verified_acceptance(steps: Sequence[StepRecord]) -> float | None:
    """Estimate of a: accepted / verified drafts (the maximum-likelihood fit of the model).

    Unverified drafts (after a rejection) say nothing about a, so they are left out;
    this is why it can differ from the summary's accepted / drafted rate.
    """
    accepted = sum(step.num_accepted for step in steps)
    rejected = sum(step.verdicts.count("rejected") for step in steps)
    return accepted / (accepted + rejected) if accepted + rejected else None


def truncated_geometric(alpha: float, k: int) -> list[float]:
    """P(n accepted) for n = 0..k."""
    return [alpha**n * (1.0 - alpha) for n in range(k)] + [alpha**k]


def expected_histogram(alpha: float, ks: Sequence[int], max_k: int) -> list[float]:
    """Model probability of n = 0..max_k accepted, averaged over steps with draft lengths `ks`."""
    total = [0.0] * (max_k + 1)
    for k in ks:
        for n, probability in enumerate(truncated_geometric(alpha, k)):
            total[n] += probability
    return [value / len(ks) for value in total] if ks else total
