"""Lab mode: the engine as it stands after each of the lab's problems A-D.

Each stage switches pieces of the correct engine off (SpecConfig.carryover,
cutoff_mode), so a class can watch what breaks without each piece; the tree stage
(TREE_STAGE, after D) keeps the correct engine and drafts a token tree instead of
a chain. Analysis helpers find where a run first leaves target-only output and
how far each cache drifts from the committed length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.config import SpecConfig
from engine.formats.trace import Trace


@dataclass(frozen=True)
class LabStage:
    key: str
    title: str
    carryover: bool
    cutoff_mode: str
    explanation: str
    tree_nodes: int = 0              # > 0: the stage drafts a token tree of this many nodes (docs/architecture.md §2)
    tree_branch: int = SpecConfig.tree_branch

    def apply(self, config: SpecConfig) -> SpecConfig:
        return config.replace(carryover=self.carryover, cutoff_mode=self.cutoff_mode, tree_nodes=self.tree_nodes,
                              tree_branch=self.tree_branch)


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
             "position (stage A's dashed 'missing' line is gone), but rejected positions still pile up in both "
             "caches: the stale lines climb at every rejection, so acceptance does not recover."),
    LabStage("C", "C. + cache cutoff by zero-filling", True, "zero_fill",
             "Rejected positions are now zeroed in place instead of removed: a first try at cleaning up. Their "
             "values are "
             "gone, but the slots remain: nothing is removed, so the KV records count them as stale, and "
             "attention still gives each zero key a weight of exp(0), diluting real context with empty vectors, "
             "and new tokens still get positions past the real end."),
    LabStage("D", "D. + real cutoff", True, "truncate",
             "Rejected positions are removed from both caches: the target loses k - accepted, the draft "
             "max(0, k - accepted - 1). Every cache equals a fresh prefill of the committed text again, "
             "and greedy output is token for token what the target alone writes."),
)


TREE_NODES, TREE_BRANCH = 16, 3        # the tree stage's node budget and children per node
TREE_STAGE = LabStage(
    "T", "T. D, drafting a token tree", True, "truncate",
    "The correct engine (D), but each step drafts a token tree instead of a chain: each node offers the draft's "
    f"{TREE_BRANCH} most probable next tokens as children, and the {TREE_NODES} candidates the draft rates "
    "likeliest (the product of its probabilities along their line) form the tree, at most k deep. The target "
    "checks every node in one forward, each node attending only to the committed text and its own ancestors. "
    "The longest branch the target agrees with is kept, so more tokens survive each target forward; but that "
    f"forward now reads {TREE_NODES} nodes instead of k + 1 tokens, which costs time on a CPU. Greedy output is "
    "still the target's own, up to float rounding at near ties.",
    tree_nodes=TREE_NODES, tree_branch=TREE_BRANCH)


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


@dataclass(frozen=True)
class CachePositions:
    """One cache after one step's cutoff, against what a correct engine holds there."""

    stale: int            # positions kept that hold no committed text (rejected drafts, kept or zero-filled)
    missing: int          # committed positions the cache never fed (d_k skipped without the carryover)
    known: bool = True    # False: a specviz.trace/1 record, whose stale count is unknown (only the net)


def cache_positions(trace: Trace) -> list[tuple[CachePositions, CachePositions | None]]:
    """Per step, the (target, draft) cache's stale and missing positions, apart: the KV records'
    cumulative `stale`, and the missing ones as stale minus the drift (`cache_drift`)."""
    counts = []
    for step, (target, draft) in zip(trace.steps, cache_drift(trace)):
        counts.append((_split(target, step.kv_target.stale),
                       None if draft is None or step.kv_draft is None else _split(draft, step.kv_draft.stale)))
    return counts


def _split(drift: int, stale: int | None) -> CachePositions:
    if stale is None:
        return CachePositions(max(drift, 0), max(-drift, 0), known=False)
    return CachePositions(stale, stale - drift)


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
