"""What the audit found, as plain values, and its sentences (torch-free: the page may import it).

A token is *marked* when the target would sample it less than once in a million (`RARE`) at the
run's temperature, top-k and top-p. Under greedy decoding (T = 0) the target's law is its argmax,
so there a token is marked when it is not the target's argmax (its logit's margin below the argmax
says how near a tie it was: float rounding flips only near ties, docs/architecture.md §4).

`expected_marked` is the law's own yardstick: the number of marked tokens expected had each
token been drawn from the target given the same prefix (the sum over positions of the target's
mass on tokens below `RARE`). A run far above it did not sample from the target's law.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from engine.formats.trace_audit import TraceAudit
from engine.records import Alternative

RARE = 1e-6          # "less than once in a million"
# What emitted a token: an accepted draft, the target's own token after a rejection (recovered) or
# after all drafts were accepted (bonus), or a step with no drafts (a prefill, target-only)
KINDS = ("accepted draft", "recovered", "bonus", "no drafts")


def token_kinds(step_sizes: Sequence[int], step_drafted: Sequence[int]) -> list[str]:
    """Each token's kind from the tokens each step emitted and the drafts it verified: a step of s
    tokens after d drafts emitted s - 1 accepted drafts, then a bonus (s - 1 == d) or a recovered
    token. (The run's last step may be cut short by the token budget: its last token then reads as
    recovered.)"""
    kinds = []
    for size, drafted in zip(step_sizes, step_drafted):
        last = "no drafts" if drafted == 0 else "bonus" if size - 1 >= drafted else "recovered"
        kinds += ["accepted draft"] * (size - 1) + [last] * (size > 0)
    return kinds


@dataclass(frozen=True)
class TokenScore:
    position: int                    # 0-based among the generated tokens
    step: int | None                 # the engine step that emitted it, when the run says
    token_id: int
    text: str
    probability: float               # the target's probability at the run's temperature (T = 0: its softmax)
    top: tuple[Alternative, ...]     # the target's most likely tokens there, at the same temperature
    marked: bool
    margin: float | None = None      # T = 0 only: the argmax's logit minus this token's (0 for the argmax;
                                     # a tiny margin is a near tie that float rounding can flip)
    kind: str | None = None          # KINDS, when the run says how many drafts each step verified


@dataclass(frozen=True)
class Audit:
    temperature: float
    top_k: int
    top_p: float
    threshold: float
    scores: tuple[TokenScore, ...]
    expected_marked: float           # marked tokens expected under the target's own law (0 when greedy)

    @property
    def marked(self) -> tuple[TokenScore, ...]:
        return tuple(score for score in self.scores if score.marked)

    @property
    def marked_steps(self) -> tuple[int, ...]:
        """The steps holding a marked token, in order (tokens without a step are left out)."""
        return tuple(sorted({score.step for score in self.marked if score.step is not None}))

    def marked_by_kind(self) -> dict[str, int]:
        """How many marked tokens each kind holds (tokens of unknown kind left out)."""
        return dict(Counter(score.kind for score in self.marked if score.kind is not None))

    def summary(self) -> str:
        rule = ("not the target's argmax" if self.temperature == 0 else
                f"below {self.threshold:g} under the target at T = {self.temperature:g}"
                + (f", top-k {self.top_k}" if self.top_k else "") + (f", top-p {self.top_p:g}" if self.top_p < 1 else ""))
        steps = self.marked_steps
        where = f" in {len(steps)} step{'s' * (len(steps) != 1)}" if steps else ""
        expected = "" if self.temperature == 0 else (
            f"; sampling from the target itself would mark {self.expected_marked:.2g} on average")
        by_kind = self.marked_by_kind()
        kinds = "" if not by_kind else "; " + ", ".join(
            f"{by_kind[kind]} of {sum(score.kind == kind for score in self.scores)} {kind} tokens"
            for kind in KINDS if kind in by_kind)
        return f"{len(self.marked)} of {len(self.scores)} tokens marked{where} ({rule}){kinds}{expected}."


def marked_lines(audit: Audit) -> list[str]:
    """One line per marked token: where, which token, what the target gives it, what it prefers."""
    lines = []
    for score in audit.marked:
        where = f"step {score.step}, token {score.position}" if score.step is not None else f"token {score.position}"
        top = ", ".join(f"{alt.text!r} {alt.prob:.3g}" for alt in score.top)
        given = (f"softmax {score.probability:.3g}, margin {score.margin:.3g} below the argmax"
                 if audit.temperature == 0 and score.margin is not None else f"p = {score.probability:.3g}")
        kind = f" ({score.kind})" if score.kind else ""
        lines.append(f"{where}: {score.text!r} (id {score.token_id}){kind}: {given}; the target's top: {top}")
    return lines


def trace_audit(audit: Audit, scored_by: str) -> TraceAudit:
    """The audit as a trace saves it (engine/formats/trace_audit.py): every token's probability and the marked ones."""
    return TraceAudit(scored_by, audit.temperature, audit.top_k, audit.top_p, audit.threshold, audit.expected_marked,
                      tuple(score.probability for score in audit.scores),
                      tuple(score.position for score in audit.scores if score.marked))
