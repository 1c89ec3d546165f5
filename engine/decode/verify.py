"""The acceptance rule: pure functions of tensors and a generator, computed on the device.

Greedy: accept draft i while it equals the target's argmax; the first mismatch is
replaced by the target's argmax ("recovered"); if all k match, the argmax of the
k+1-th distribution is the bonus token.

Sampling (Leviathan et al. 2023, Chen et al. 2023): accept draft i with probability
min(1, p_i(d_i) / q_i(d_i)); at the first rejection sample a recovered token from
norm(max(0, p_i - q_i)); if all k are accepted sample a bonus token from p_{k+1}.
Output tokens are then distributed exactly as target-only sampling. A drafter
without a distribution (n-gram lookup) is a point mass: q_i = one-hot(d_i).

Nothing here reads a value back to the host: the number accepted and the next token stay
device tensors (`Decision`), so a GPU step queues draft, verify and acceptance without
waiting, and the step's record comes back in one copy (engine/decode/readout.py). The
random stream is the same whatever the outcome: k uniforms, then one draw from the law of
the step's last token. `Decision.read()` brings one decision to the host (tests, and the
acceptance's own checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decode.sampling import draw


@dataclass(frozen=True)
class Acceptance:
    """The acceptance rule's result on the host, as the step's record needs it."""

    num_accepted: int
    next_token: int                       # the recovered or bonus token
    next_kind: str                        # "recovered" | "bonus"
    accept_probs: tuple[float, ...] | None  # min(1, p/q) per draft token (None when greedy)
    draws: tuple[float | None, ...] | None  # uniform draw per verified draft token (None when greedy)
    residual: torch.Tensor | None         # (V,) norm(max(0, p - q)) at a sampled rejection


@dataclass(frozen=True)
class Decision:
    """The acceptance rule's result, still on the device."""

    num_drafts: int                       # k (known on the host)
    num_accepted: torch.Tensor            # () long
    next_token: torch.Tensor              # (1,) long: the recovered or bonus token
    target_choice: torch.Tensor           # (k+1,) long: the target's argmax at each position
    accept_probs: torch.Tensor | None     # (k,) min(1, p/q) (sampling)
    uniforms: torch.Tensor | None         # (k,) the draws compared with them (sampling)
    next_law: torch.Tensor | None         # (V,) what the next token was drawn from (sampling)

    def acceptance(self, num_accepted: int, next_token: int, accept_probs: list[float] | None,
                   uniforms: list[float] | None) -> Acceptance:
        """The host Acceptance, from this decision's values read back (one copy, or `read`)."""
        kind = "bonus" if num_accepted == self.num_drafts else "recovered"
        if accept_probs is None or uniforms is None:
            return Acceptance(num_accepted, next_token, kind, None, None, None)
        draws = tuple(u if i <= num_accepted else None for i, u in enumerate(uniforms))   # checked ones only
        residual = self.next_law if kind == "recovered" else None
        return Acceptance(num_accepted, next_token, kind, tuple(accept_probs), draws, residual)

    def read(self) -> Acceptance:
        """The host Acceptance, read back value by value (tests; the engine reads through one copy)."""
        probs = self.accept_probs.tolist() if self.accept_probs is not None else None
        uniforms = self.uniforms.tolist() if self.uniforms is not None else None
        return self.acceptance(int(self.num_accepted), int(self.next_token), probs, uniforms)


def decide_greedy(drafts: torch.Tensor, target_logits: torch.Tensor) -> Decision:
    """drafts: (k,) ids; target_logits: (k+1, V). Prefix match against the target argmax."""
    k = drafts.shape[0]
    target_choice = torch.argmax(target_logits, dim=-1)                                   # (k+1,)
    num_accepted = accepted_prefix(drafts == target_choice[:k])                           # ()
    next_token = target_choice.index_select(0, num_accepted.view(1))    # (1,); tensor[0-dim index] would sync
    return Decision(k, num_accepted, next_token, target_choice, None, None, None)


def decide_sampling(drafts: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                    generator: torch.Generator | None) -> Decision:
    """Lossless speculative sampling.

    drafts: (k,) ids; draft_probs: (k, V) or None for a point-mass drafter; target_probs:
    (k+1, V), both already through the same temperature/top-k/top-p. Draws k uniforms up
    front so the random stream does not depend on the outcome."""
    k = drafts.shape[0]
    device = target_probs.device
    uniforms = (torch.rand(k, generator=generator, device=device) if k     # (k,); none drawn for k = 0
                else torch.empty(0, device=device))
    index = torch.arange(k, device=device)
    p_of_draft = target_probs[index, drafts]                                              # (k,)
    q_of_draft = draft_probs[index, drafts] if draft_probs is not None else torch.ones_like(p_of_draft)
    ratios = acceptance_probabilities(p_of_draft, q_of_draft)                             # (k,)
    num_accepted = accepted_prefix(uniforms < ratios)                                     # ()
    law = next_token_distribution(drafts, draft_probs, target_probs, num_accepted)        # (V,)
    next_token = draw(law, generator)                                                     # (1,)
    return Decision(k, num_accepted, next_token, torch.argmax(target_probs, dim=-1), ratios, uniforms, law)


def accepted_prefix(matches: torch.Tensor) -> torch.Tensor:
    """(k,) bool -> () long: how many leading entries are True (the accepted drafts)."""
    return torch.cumprod(matches.long(), dim=0).sum()


def acceptance_probabilities(p_of_draft: torch.Tensor, q_of_draft: torch.Tensor) -> torch.Tensor:
    """min(1, p_i(d_i) / q_i(d_i)) per draft token; both (k,)."""
    return torch.clamp(p_of_draft / q_of_draft, max=1.0)


def next_token_distribution(drafts: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                            num_accepted: torch.Tensor) -> torch.Tensor:
    """(V,) law of the step's last token: p_{k+1} when all k drafts were accepted (bonus),
    else the residual at the first rejected position. `num_accepted` stays on the device:
    both laws are formed from the one row it selects, then one is kept."""
    k = drafts.shape[0]
    at = num_accepted.view(1)
    target_row = target_probs.index_select(0, at)[0]                                      # (V,) p at the stop
    if k == 0:
        return target_row
    clamped = torch.clamp(at, max=k - 1)                    # a row that exists when all k were accepted
    draft_id = drafts.index_select(0, clamped)
    draft_row = draft_probs.index_select(0, clamped)[0] if draft_probs is not None else None
    residual = residual_distribution(target_row, draft_row, draft_id)
    return torch.where(at == k, target_row, residual)


def residual_distribution(target_row: torch.Tensor, draft_row: torch.Tensor | None,
                          draft_id: torch.Tensor | int) -> torch.Tensor:
    """norm(max(0, p - q)) over the vocabulary; q is one-hot(draft_id) when draft_row is None.
    Where p == q up to rounding (a rejection had probability ~0) it falls back to p."""
    if draft_row is None:
        draft_row = torch.zeros_like(target_row).index_fill_(0, torch.as_tensor(draft_id, device=target_row.device)
                                                             .view(1), 1.0)
    residual = torch.clamp(target_row - draft_row, min=0.0)                               # (V,)
    total = residual.sum()
    return torch.where(total > 0, residual / torch.clamp(total, min=torch.finfo(residual.dtype).tiny), target_row)


def accept_greedy(draft_ids: list[int], target_logits: torch.Tensor) -> Acceptance:
    """The greedy rule on the host: draft_ids (k tokens), target_logits (k+1, V)."""
    drafts = torch.tensor(draft_ids, dtype=torch.long, device=target_logits.device)
    return decide_greedy(drafts, target_logits).read()


def accept_sampling(draft_ids: list[int], draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                    generator: torch.Generator | None) -> Acceptance:
    """The sampling rule on the host: draft_ids (k tokens), draft_probs (k, V) or None, target_probs (k+1, V)."""
    drafts = torch.tensor(draft_ids, dtype=torch.long, device=target_probs.device)
    return decide_sampling(drafts, draft_probs, target_probs, generator).read()
