"""Adaptive draft length: each step's k chosen for the most expected tokens per second.

After every step the controller updates two things it measured:

- the acceptance rate a, from decayed counts of draft positions the target reached
  and accepted (a step that accepts 3 of 5 reached 4 positions and accepted 3);
- the costs: milliseconds per drafted token, and milliseconds of a verify forward
  by the number of tokens it fed (verifying is not flat in that number on every
  backend: stock float32 kernels on a CPU cost one step per three rows).

The next k maximises E(k) / cost(k), with E(k) = (1 - a^(k+1)) / (1 - a) the
expected tokens per step under i.i.d. acceptance (the speedup model the Explore
tab draws) and cost(k) = k * draft_ms + verify_ms(k + 1 tokens). A verify size
not yet measured is assumed to cost what the nearest measured smaller one did, so
the controller tries a longer draft when acceptance is high and learns its price.
k stays within [1, max_k]; the first step uses the configured k.

Unlike transformers' +2/-1 heuristic this sees the cost side, so it settles on a
short k when drafting is expensive relative to verifying and a long one when it
is cheap. Timings drive it, so with sampling two runs with one seed can choose
different k and draw differently; greedy output never depends on k.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.metrics import expected_tokens_per_step

MAX_ALPHA = 0.98          # keeps E(k) growing with k finite when every draft so far was accepted


@dataclass
class AdaptiveDraftLength:
    """Chooses k per step from measured acceptance and measured costs."""

    k: int                                  # the k to use next
    max_k: int
    decay: float = 0.7                      # weight of past steps in the acceptance counts
    accepted: float = 1.0                   # decayed counts, with a weak prior of a = 0.5
    reached: float = 2.0
    draft_ms_per_token: float | None = None
    verify_ms_by_rows: dict[int, float] = field(default_factory=dict)

    @property
    def acceptance(self) -> float:
        return min(MAX_ALPHA, self.accepted / self.reached)

    def observe(self, k: int, num_accepted: int, draft_ms: float, verify_ms: float, verify_rows: int) -> int:
        """Record one step (k drafted, num_accepted of them accepted) and return the next k."""
        if k > 0:
            reached = num_accepted + (1 if num_accepted < k else 0)
            self.accepted = self.decay * self.accepted + num_accepted
            self.reached = self.decay * self.reached + reached
            self.draft_ms_per_token = _blend(self.draft_ms_per_token, draft_ms / k)
        self.verify_ms_by_rows[verify_rows] = _blend(self.verify_ms_by_rows.get(verify_rows), verify_ms)
        self.k = self.best_k()
        return self.k

    def best_k(self) -> int:
        """argmax over k in [1, max_k] of E(k) / cost(k); the current k until costs are known."""
        if self.draft_ms_per_token is None or not self.verify_ms_by_rows:
            return self.k
        alpha = self.acceptance
        return max(range(1, self.max_k + 1),
                   key=lambda k: expected_tokens_per_step(alpha, k)
                   / max(1e-9, k * self.draft_ms_per_token + self.verify_ms(k + 1)))

    def verify_ms(self, rows: int) -> float:
        """Measured verify time for `rows` tokens, else that of the nearest measured smaller
        (then larger) size."""
        known = self.verify_ms_by_rows
        if rows in known:
            return known[rows]
        smaller = [r for r in known if r < rows]
        return known[max(smaller)] if smaller else known[min(known)]


def _blend(previous: float | None, value: float, weight: float = 0.5) -> float:
    return value if previous is None else (1 - weight) * previous + weight * value
