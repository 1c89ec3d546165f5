"""Summary metrics derived from step records, never counted on the side.

Definitions (also in the README), over the *verify steps*, the steps that verified drafts (k > 0):
- acceptance rate = accepted draft tokens / drafted tokens;
- mean accepted length τ = 1 + accepted drafts / verify steps: each verify step's accepted drafts plus
  the one recovered or bonus token, averaged;
- per-position acceptance[i] = P(draft i accepted | draft i was verified);
- accepted-length histogram[n] = number of verify steps that accepted exactly n drafts;
- mean tree size = token-tree nodes verified per step (tree runs; None for chains);
- tree counts (tree runs): nodes drafted (every one checked by its step's target forward), nodes the
  walk tried, and accepted path tokens, so a tree's acceptance rate is accepted path tokens / nodes.

These are vLLM 0.32's own mean_acceptance_length, draft_acceptance_rate and acceptance_histogram
(vllm/v1/metrics/stats.py `RequestSpecDecodeMetrics.to_dict`: 1 + accepted / num_spec_steps, over the
steps that verified drafts), so a vLLM trace shows the numbers its server reports (docs/architecture.md
§10, "One quantity, one number"). A step that drafted nothing (vLLM's prefill step, an n-gram lookup
without a match, SpecViz's last step when one token of the budget is left) emits one token without a
verification: it counts in new tokens, steps and target forwards, not in τ or the histogram
(`Summary.undrafted_steps` says how many were left out). SpecViz's own first step prefills and
verifies, so it counts. τ counts accepted drafts, as the acceptance rate does, so τ − 1 = r × drafted /
verify steps exactly (an EOS among accepted drafts ends the output before the drafts after it, which
still count as accepted). Before any step verified drafts τ is None (vLLM reports 1.0).

Every verify step is one target forward, so τ is also the tokens per verifying target forward,
for chains and trees alike. In a tree run the draft counts (drafted, acceptance
rate, per position) follow each step's main line (docs/architecture.md §2, "Token trees").

And the i.i.d. acceptance model the figures compare with: each draft accepted with
probability α, independently, so a step emits E = (1 - α^(k+1)) / (1 - α) tokens on average.
The figures take α from the summary's estimated_alpha, the mean recorded Σ min(p, q), the one
acceptance letter on every tab (specviz/quantities.py); the measured acceptance rate is r.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.records import StepRecord


@dataclass(frozen=True)
class BaselineStats:
    """Target-only decoding of the same prompt and config, for the speedup and identity check."""

    tokens_per_s: float
    identical: bool
    wall_s: float = 0.0
    exact_expected: bool = True      # False when dtypes/sampling make bit-identity not guaranteed
    first_difference: FirstDifference | None = None   # where a greedy output leaves target-only's (None: it never does)


NEAR_TIE_LOGITS = 0.5     # a top-2 logit margin below this is a near tie: bfloat16 rounding can swap the two


@dataclass(frozen=True)
class FirstDifference:
    """Where a greedy run's output first leaves target-only decoding, and how close a call it was."""

    token: int                       # index among the new tokens
    step: int                        # the step that emitted it
    margin: float                    # the target's top-2 logit difference there, in target-only decoding
                                     # (a near tie: reduced-precision rounding of a k + 1-row verify can flip it)

    @property
    def near_tie(self) -> bool:
        return self.margin < NEAR_TIE_LOGITS


@dataclass(frozen=True)
class Summary:
    new_tokens: int
    steps: int
    target_forwards: int
    drafted: int
    accepted: int
    acceptance_rate: float | None
    mean_accepted_length: float | None
    per_position_acceptance: tuple[float | None, ...]
    accepted_length_histogram: tuple[int, ...]
    wall_s: float
    tokens_per_s: float | None
    baseline: BaselineStats | None
    estimated_alpha: float | None    # mean over draft positions of sum_x min(p(x), q(x))
    cost_ratio: float | None         # draft time per drafted token / verify time per step (prefill step excluded)
    mean_tree_nodes: float | None = None   # token-tree nodes verified per step; None for a chain run
    verify_steps: int | None = None  # steps that verified drafts (k > 0): τ's and the histogram's steps

    @property
    def undrafted_steps(self) -> int:
        """Steps that drafted nothing, left out of τ and the histogram (one token each, no verification)."""
        return self.steps - (self.steps if self.verify_steps is None else self.verify_steps)

    @property
    def speedup(self) -> float | None:
        if self.baseline is None or not self.tokens_per_s or not self.baseline.tokens_per_s:
            return None
        return self.tokens_per_s / self.baseline.tokens_per_s


def summarize(steps: Sequence[StepRecord], wall_s: float, baseline: BaselineStats | None = None,
              k: int = 0) -> Summary:
    """Compute every summary figure from the steps alone; the histogram spans 0..max(k, the largest step k)
    (pass the engine's k for an external trace, whose histogram vLLM sizes by its num_spec_tokens)."""
    new_tokens = sum(step.num_emitted for step in steps)
    verifying = verify_steps(steps)
    drafted = sum(step.k for step in steps)
    accepted = sum(step.num_accepted for step in verifying)
    max_k = max((step.k for step in steps), default=0)
    reached = [0] * max_k
    accepted_at = [0] * max_k
    histogram = [0] * (max(max_k, k) + 1)
    for step in verifying:
        histogram[step.num_accepted] += 1
        for position, verdict in enumerate(step.verdicts):
            if verdict != "unverified":
                reached[position] += 1
                accepted_at[position] += verdict == "accepted"
    overlaps = [value for step in steps for value in step.overlap]
    return Summary(
        new_tokens=new_tokens,
        steps=len(steps),
        target_forwards=len(steps),
        drafted=drafted,
        accepted=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted_length=tokens_per_verify_step(accepted, len(verifying)),
        per_position_acceptance=tuple(a / r if r else None for a, r in zip(accepted_at, reached)),
        accepted_length_histogram=tuple(histogram),
        wall_s=wall_s,
        tokens_per_s=new_tokens / wall_s if wall_s > 0 else None,
        baseline=baseline,
        estimated_alpha=sum(overlaps) / len(overlaps) if overlaps else None,
        cost_ratio=cost_ratio(steps),
        mean_tree_nodes=mean_tree_nodes(steps),
        verify_steps=len(verifying),
    )


def verify_steps(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The steps that verified drafts (k > 0): the steps τ and the histogram count (see the module docstring)."""
    return [step for step in steps if step.k > 0]


def tokens_per_verify_step(accepted: int, steps: int) -> float | None:
    """τ = 1 + accepted / verify steps (vLLM's mean_acceptance_length); None before any step verified drafts."""
    return 1.0 + accepted / steps if steps else None


def running_tokens_per_step(steps: Sequence[StepRecord]) -> list[float | None]:
    """τ over the steps so far, after each step (None until a step verified drafts): the per-step chart's line."""
    running, accepted, verified = [], 0, 0
    for step in steps:
        if step.k > 0:
            accepted, verified = accepted + step.num_accepted, verified + 1
        running.append(tokens_per_verify_step(accepted, verified))
    return running


def mean_tree_nodes(steps: Sequence[StepRecord]) -> float | None:
    """Tree nodes verified per step (the target forward's draft rows); None when no step drafted a tree."""
    trees = [len(step.tree.nodes) for step in steps if step.tree is not None]
    return sum(trees) / len(trees) if trees else None


@dataclass(frozen=True)
class TreeCounts:
    """What the steps of a tree run drafted, tried and accepted, summed over its tree steps."""

    steps: int
    nodes: int                   # drafted; each step's target forward checks every one of its nodes
    tried: int                   # nodes the walk compared with the target (accepted or rejected)
    accepted: int                # path tokens accepted

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted path tokens / nodes drafted: the tree's share of drafts accepted."""
        return self.accepted / self.nodes if self.nodes else None


def tree_counts(steps: Sequence[StepRecord]) -> TreeCounts | None:
    """The tree steps' counts; None when no step drafted a tree (a chain run)."""
    trees = [step.tree for step in steps if step.tree is not None]
    if not trees:
        return None
    return TreeCounts(steps=len(trees), nodes=sum(len(tree.nodes) for tree in trees),
                      tried=sum(node.verdict != "unreached" for tree in trees for node in tree.nodes),
                      accepted=sum(len(tree.path) for tree in trees))


def cost_ratio(steps: Sequence[StepRecord]) -> float | None:
    """c = draft time per drafted token / verify time per step, over the steps after the first: the
    first step's forwards also prefill the prompt in both models, which is no part of a step's cost."""
    costs = step_costs(steps)
    return costs[0] / costs[1] if costs is not None else None


def step_costs(steps: Sequence[StepRecord]) -> tuple[float, float] | None:
    """(draft ms per drafted token, verify ms per step) over the steps after the first (see
    cost_ratio); None when nothing was drafted or timed."""
    timed = steps[1:] if len(steps) > 1 else steps
    drafted = sum(step.k for step in timed)
    draft_ms = sum(step.timing.draft for step in timed)
    verify_ms = sum(step.timing.verify for step in timed)
    return (draft_ms / drafted, verify_ms / len(timed)) if drafted and verify_ms > 0 else None


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E = (1 - a^(k+1)) / (1 - a): expected emitted tokens per step, bonus included."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(alpha: float, k: int, cost_ratio: float, verify_cost: float = 1.0) -> float:
    """(1 - a^(k+1)) / ((1 - a)(k c + v)): Leviathan et al.'s walltime improvement factor, with c one
    draft token's cost and v the verify forward's, both in units of one target decoding forward.
    Leviathan et al. take v = 1 (verifying k + 1 tokens costs one forward, true on a GPU with room
    to spare); on a CPU v grows with k, and the measured v gives the speedup to expect there."""
    return expected_tokens_per_step(alpha, k) / (k * cost_ratio + verify_cost)


def verify_cost(steps: Sequence[StepRecord], baseline: BaselineStats | None) -> float | None:
    """v = one verify forward's time / one target-only token's time: the verify ms per step after
    the first (step_costs) against the target-only run's wall time per token (its prompt's prefill
    included, a few percent over a long run). None without a timed baseline."""
    costs = step_costs(steps)
    if costs is None or baseline is None or not baseline.tokens_per_s:
        return None
    return costs[1] / (1000.0 / baseline.tokens_per_s)


def steady_speedup(steps: Sequence[StepRecord], baseline: BaselineStats | None) -> float | None:
    """The speedup over target-only of the steps after the first: their emitted tokens per second of
    their own wall time, against the target-only run's tokens per second. The first step also
    prefills the prompt in both models, which the run's speedup pays for and the model leaves out."""
    later = steps[1:]
    seconds = sum(step.timing.total for step in later) / 1000.0
    if not later or seconds <= 0 or baseline is None or not baseline.tokens_per_s:
        return None
    return sum(step.num_emitted for step in later) / seconds / baseline.tokens_per_s


# The i.i.d. acceptance model: each draft accepted with probability α, independently. The number
# accepted in a step of k drafts is then truncated-geometric: P(n) = α^n (1 - α) for n < k, P(k) = α^k.

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
