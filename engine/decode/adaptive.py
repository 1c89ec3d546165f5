"""Adaptive draft length: each step's k chosen for the most expected tokens per second.

Two measured quantities drive it:

- `StepCosts`, kept on the loaded pair per drafter (`DrafterCosts`) and shared by
  all its generations with that drafter (costs are a property of the models, the
  drafter and the machine, not of the prompt): milliseconds per drafted token, and
  milliseconds of a verify forward by the number of tokens it fed. Verifying is not
  flat in that number on every backend (stock float32 kernels on a CPU grow in
  steps of a few rows; engine/runtime/cpu/kernels.py), so each size is measured.
- the acceptance rate a of this generation, from decayed counts of the draft
  positions the target reached and accepted (a step that accepts 3 of 5 reached
  4 positions and accepted 3).

The next k maximises E(k) / cost(k), with E(k) = (1 - a^(k+1)) / (1 - a) the
expected tokens per step under i.i.d. acceptance (the speedup model the Explore
tab draws) and cost(k) = k * draft_ms + verify_ms(k + 1 tokens). Sizes not yet
measured are estimated optimistically, so the controller goes and measures them:
a larger size is taken to cost what the nearest measured smaller one did (flat),
a smaller one to scale down in proportion to its rows. k stays within
[1, max_k]. A generation starts from its drafter's last acceptance estimate on the
pair (0.5 at first) and, once costs are known, from the k they favour; before that,
from the configured k. The first step's forwards also prefill the prompt (the
target's verify and the draft model's first forward), so they are not timed: their
verdicts count, their milliseconds never reach the costs.

An n-gram lookup drafts in microseconds where a draft model pays a forward per token,
and the two are accepted at unrelated rates, so each drafter keeps its own costs and
acceptance: a run with one never steers the k of a run with the other. What else
changes the costs (dtypes, device, prepacking) is the pair's own. Sampling's top-k and
top-p add work to drafting and verifying alike, which leaves the ratio that decides k
nearly where it was, and the acceptance prior weighs two positions, so a change of
temperature is learned within a few steps.

Unlike transformers' +2/-1 heuristic this sees the cost side, so it settles on a
short k where drafting is expensive relative to verifying and a long one where
it is cheap. Timings drive it, so with sampling two runs with one seed can choose
different k and draw differently; greedy output never depends on k.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.metrics import expected_tokens_per_step

MAX_ALPHA = 0.98          # keeps E(k) growing with k finite when every draft so far was accepted


@dataclass
class StepCosts:
    """Measured costs of one pair on this machine: shared by its generations."""

    draft_ms_per_token: float | None = None
    verify_ms_by_rows: dict[int, float] = field(default_factory=dict)
    acceptance: float = 0.5                 # the last generation's final estimate: the next one's prior

    @property
    def known(self) -> bool:
        return self.draft_ms_per_token is not None and bool(self.verify_ms_by_rows)

    def observe(self, k: int, draft_ms: float, verify_ms: float, verify_rows: int) -> None:
        if k > 0:
            self.draft_ms_per_token = _blend(self.draft_ms_per_token, draft_ms / k)
        self.verify_ms_by_rows[verify_rows] = _blend(self.verify_ms_by_rows.get(verify_rows), verify_ms)

    def verify_ms(self, rows: int) -> float:
        """Measured verify time for `rows` tokens, else the optimistic estimate (module docstring)."""
        known = dict(self.verify_ms_by_rows)        # a snapshot: another generation may be adding sizes
        if rows in known:
            return known[rows]
        smaller = [r for r in known if r < rows]
        if smaller:
            return known[max(smaller)]
        nearest = min(known)
        return known[nearest] * rows / nearest

    def step_ms(self, k: int) -> float:
        return k * (self.draft_ms_per_token or 0.0) + self.verify_ms(k + 1)


@dataclass
class AdaptiveDraftLength:
    """Chooses k per step from this generation's acceptance and the pair's measured costs."""

    k: int                                  # the k to use next
    max_k: int
    costs: StepCosts = field(default_factory=StepCosts)
    decay: float = 0.85                     # weight of past steps in the acceptance counts
    prior_weight: float = 2.0               # the prior (costs.acceptance) counts as this many positions
    accepted: float = field(init=False)
    reached: float = field(init=False)

    def __post_init__(self) -> None:
        self.accepted = self.costs.acceptance * self.prior_weight
        self.reached = self.prior_weight
        self.k = max(1, min(self.k if not self.costs.known else self.best_k(), self.max_k))

    @property
    def acceptance(self) -> float:
        return min(MAX_ALPHA, self.accepted / self.reached)

    def observe(self, k: int, num_accepted: int, draft_ms: float, verify_ms: float, verify_rows: int,
                timed: bool = True) -> int:
        """Record one step (k drafted, num_accepted of them accepted) and return the next k.
        `timed=False` (the first step, whose forwards also prefill the prompt) counts only the verdicts."""
        if k > 0:
            reached = num_accepted + (1 if num_accepted < k else 0)
            self.accepted = self.decay * self.accepted + num_accepted
            self.reached = self.decay * self.reached + reached
        if timed:
            self.costs.observe(k, draft_ms, verify_ms, verify_rows)
        self.costs.acceptance = self.acceptance
        self.k = self.best_k()
        return self.k

    def best_k(self) -> int:
        """argmax over k in [1, max_k] of E(k) / cost(k); the current k until costs are known."""
        if not self.costs.known:
            return self.k
        alpha = self.acceptance
        return max(range(1, self.max_k + 1),
                   key=lambda k: expected_tokens_per_step(alpha, k) / max(1e-9, self.costs.step_ms(k)))


@dataclass
class DrafterCosts:
    """A pair's measured costs, one `StepCosts` per drafter ("model", "ngram"): shared by
    the generations that draft the same way, never between drafters."""

    by_drafter: dict[str, StepCosts] = field(default_factory=dict)

    def for_drafter(self, drafter: str) -> StepCosts:
        """The costs of `drafter` on this pair, empty until its first timed step."""
        return self.by_drafter.setdefault(drafter, StepCosts())


def _blend(previous: float | None, value: float, weight: float = 0.5) -> float:
    return value if previous is None else (1 - weight) * previous + weight * value
