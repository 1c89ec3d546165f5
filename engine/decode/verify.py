"""The acceptance rule: pure functions of tensors and a generator.

Greedy: accept draft i while it equals the target's argmax; the first mismatch is
replaced by the target's argmax ("recovered"); if all k match, the argmax of the
k+1-th distribution is the bonus token.

Sampling (Leviathan et al. 2023, Chen et al. 2023): accept draft i with probability
min(1, p_i(d_i) / q_i(d_i)); at the first rejection sample a recovered token from
norm(max(0, p_i - q_i)); if all k are accepted sample a bonus token from p_{k+1}.
Output tokens are then distributed exactly as target-only sampling. A drafter
without a distribution (n-gram lookup) is a point mass: q_i = one-hot(d_i).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Acceptance:
    num_accepted: int
    next_token: int                       # the recovered or bonus token
    next_kind: str                        # "recovered" | "bonus"
    accept_probs: tuple[float, ...] | None  # min(1, p/q) per draft token (None when greedy)
    draws: tuple[float | None, ...] | None  # uniform draw per verified draft token (None when greedy)
    residual: torch.Tensor | None         # (V,) norm(max(0, p - q)) at a sampled rejection


def accept_greedy(draft_ids: list[int], target_logits: torch.Tensor) -> Acceptance:
    """draft_ids: k tokens; target_logits: (k+1, V). Prefix match against the target argmax."""
    target_choice = torch.argmax(target_logits, dim=-1).tolist()        # (k+1,)
    num_accepted = 0
    while num_accepted < len(draft_ids) and draft_ids[num_accepted] == target_choice[num_accepted]:
        num_accepted += 1
    kind = "bonus" if num_accepted == len(draft_ids) else "recovered"
    return Acceptance(num_accepted, target_choice[num_accepted], kind, None, None, None)


def accept_sampling(draft_ids: list[int], draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                    generator: torch.Generator | None) -> Acceptance:
    """Lossless speculative sampling.

    draft_ids: k tokens; draft_probs: (k, V) or None for a point-mass drafter;
    target_probs: (k+1, V). Both already through the same temperature/top-k/top-p.
    Draws k uniforms up front so the random stream does not depend on the outcome.
    """
    k = len(draft_ids)
    uniforms = torch.rand(k, generator=generator, device=target_probs.device).tolist() if k else []
    index = torch.arange(k, device=target_probs.device)
    ids = torch.tensor(draft_ids, dtype=torch.long, device=target_probs.device)
    p_of_draft = target_probs[index, ids]                                # (k,)
    q_of_draft = draft_probs[index, ids] if draft_probs is not None else torch.ones_like(p_of_draft)
    ratios = acceptance_probabilities(p_of_draft, q_of_draft)            # (k,)
    num_accepted = 0
    while num_accepted < k and uniforms[num_accepted] < ratios[num_accepted]:
        num_accepted += 1
    draws = tuple(u if i <= num_accepted else None for i, u in enumerate(uniforms))
    next_probs = next_token_distribution(draft_ids, draft_probs, target_probs, num_accepted)   # (V,)
    next_token = int(torch.multinomial(next_probs, 1, generator=generator).item())
    if num_accepted == k:
        return Acceptance(k, next_token, "bonus", tuple(ratios), draws, None)
    return Acceptance(num_accepted, next_token, "recovered", tuple(ratios), draws, next_probs)


def acceptance_probabilities(p_of_draft: torch.Tensor, q_of_draft: torch.Tensor) -> list[float]:
    """min(1, p_i(d_i) / q_i(d_i)) per draft token; both (k,)."""
    return torch.clamp(p_of_draft / q_of_draft, max=1.0).tolist()


def next_token_distribution(draft_ids: list[int], draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                            num_accepted: int) -> torch.Tensor:
    """(V,) law of the step's last token: p_{k+1} when all k drafts were accepted (bonus),
    else the residual at the first rejected position."""
    if num_accepted == len(draft_ids):
        return target_probs[num_accepted]
    draft_row = draft_probs[num_accepted] if draft_probs is not None else None
    return residual_distribution(target_probs[num_accepted], draft_row, draft_ids[num_accepted])


def residual_distribution(target_row: torch.Tensor, draft_row: torch.Tensor | None, draft_id: int) -> torch.Tensor:
    """norm(max(0, p - q)) over the vocabulary; q is one-hot(draft_id) when draft_row is None."""
    if draft_row is None:
        draft_row = torch.zeros_like(target_row)
        draft_row[draft_id] = 1.0
    residual = torch.clamp(target_row - draft_row, min=0.0)              # (V,)
    total = residual.sum()
    if total <= 0:   # p == q up to rounding: a rejection had probability ~0; fall back to p
        return target_row
    return residual / total
