"""Lab mode: the engine as it stands after each of the lab's problems A-D.

Each stage switches pieces of the correct engine off (SpecConfig.carryover,
cutoff_mode), so a class can watch what breaks without each piece. Analysis
helpers find where a run first leaves target-only output and how far each
cache drifts from the committed length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.config import SpecConfig
from engine.trace import Trace


@dataclass(frozen=True)
class LabStage:
    key: str
    title: str
    carryover: bool
    cutoff_mode: str
    explanation: str

    def apply(self, config: SpecConfig) -> SpecConfig:
        return config.replace(carryover=self.carryover, cutoff_mode=self.cutoff_mode)


LAB_STAGES: tuple[LabStage, ...] = (
    LabStage("A", "A. Draft and verify only", False, "none",
             "The draft proposes k tokens and the target checks them in one forward pass, but nothing is "
             "cleaned up afterwards. Rejected drafts stay in both KV caches, so the next tokens attend to "
             "keys and values of text that was never committed, at positions shifted past the real end. "
             "After a fully accepted step the draft also never sees its own last token. Output drifts away "
             "from what the target alone would write."),
    LabStage("B", "B. + bonus-token carryover", True, "none",
             "After a step where every draft was accepted, the draft model is now fed the last draft token "
             "it proposed but never ingested, together with the bonus token. Its cache no longer misses a "
             "position, but rejected positions still pile up in both caches: the cache lines climb above "
             "the committed length at every rejection."),
    LabStage("C", "C. + cache cutoff by zero-filling", True, "zero_fill",
             "Rejected positions are now zeroed in place (the lab's problem C answer). Their values are "
             "gone, but the slots remain: nothing is removed, so the KV records count them as stale, and "
             "attention still gives each zero key a weight of exp(0), diluting real context with empty vectors, "
             "and new tokens still get positions past the real end."),
    LabStage("D", "D. + real cutoff", True, "truncate",
             "Rejected positions are removed from both caches: the target loses k - accepted, the draft "
             "max(0, k - accepted - 1). Every cache equals a fresh prefill of the committed text again, "
             "and greedy output is token for token what the target alone writes."),
)


def stage(key: str) -> LabStage:
    for candidate in LAB_STAGES:
        if candidate.key == key:
            return candidate
    raise ValueError(f"unknown lab stage {key!r}; choose one of {', '.join(s.key for s in LAB_STAGES)}")


def first_divergence(trace: Trace, reference_ids: Sequence[int]) -> int | None:
    """Index of the first step whose emitted tokens leave the reference output, or None."""
    position = 0
    for step in trace.steps:
        for token in step.emitted:
            if position >= len(reference_ids) or token.id != reference_ids[position]:
                return step.index
            position += 1
    return None


def cache_drift(trace: Trace) -> list[tuple[int, int | None]]:
    """Per step, (target, draft) cache length after cutoff minus what a correct engine holds:
    the stale positions (`CacheLengths.stale`) minus the missing ones (a draft whose d_k
    was skipped without carryover).

    A correct target holds the committed tokens before the step and the drafts the step
    keeps (every committed token but the last emitted one, unless an EOS among the drafts
    ended the run); a correct draft fed all but d_k, and is not run at all in a step that
    drafts nothing (its expected length then stays where it was).
    """
    drift = []
    expected_draft = 0
    for step in trace.steps:
        target = step.kv_target.after_cutoff - (step.context_len + step.num_kept)
        draft = None
        if step.kv_draft is not None:
            if step.k > 0:
                expected_draft = step.context_len + min(step.num_kept, step.k - 1)
            draft = step.kv_draft.after_cutoff - expected_draft
        drift.append((target, draft))
    return drift
