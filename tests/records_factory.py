"""Hand-made step records for tests of metrics and parsing (no model involved)."""

from __future__ import annotations

from engine.config import SpecConfig
from engine.records import CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming, TargetToken
from engine.formats.trace import TextTokens, Trace


def make_step(index: int, k: int, num_accepted: int, context_len: int = 10, first_id: int = 1,
              eos: bool = False, draft_before: int | None = None) -> StepRecord:
    """A greedy step drafting ids first_id.. with num_accepted accepted; the target differs at the rejection.
    The draft cache starts at `draft_before` (default: all but the last committed token); a step that
    drafts nothing does not run the draft model, so its cache stays where it was."""
    draft_ids = list(range(first_id, first_id + k))
    verdicts = tuple("accepted" if i < num_accepted else "rejected" if i == num_accepted else "unverified"
                     for i in range(k))
    next_id = 90 + index
    target_ids = draft_ids[:num_accepted] + [next_id] + [0] * (k - num_accepted)
    kind = "bonus" if num_accepted == k else "recovered"
    emitted = tuple(EmittedToken(t, f"t{t}", "accepted") for t in draft_ids[:num_accepted]) + \
        (EmittedToken(next_id, f"t{next_id}", kind),)
    cut = k - num_accepted
    return StepRecord(
        index=index, context_len=context_len, k=k, carryover=(),
        draft=tuple(DraftToken(t, f"t{t}", 0.5) for t in draft_ids),
        target=tuple(TargetToken(t, f"t{t}", 0.4 if i < k else None) for i, t in enumerate(target_ids)),
        verdicts=verdicts, accept_prob=(None,) * k, draws=(None,) * k, num_accepted=num_accepted,
        emitted=emitted,
        kv_target=CacheLengths(context_len - 1, context_len + k, cut, context_len + num_accepted, 0),
        kv_draft=_draft_cache(k, num_accepted, context_len, context_len - 1 if draft_before is None else draft_before),
        timing=StepTiming(draft=4.0 * k, verify=10.0, total=10.0 + 4.0 * k), eos=eos,
        overlap=tuple(1.0 if v == "accepted" else 0.0 for v in verdicts))


def _draft_cache(k: int, num_accepted: int, context_len: int, before: int) -> CacheLengths:
    if k == 0:
        return CacheLengths(before, before, 0, before, 0)
    cut = max(0, k - num_accepted - 1)            # the draft never fed its last draft token
    return CacheLengths(before, context_len + k - 1, cut, context_len + k - 1 - cut, 0)


def make_trace(shapes: list[tuple[int, int]], wall_s: float = 2.0) -> Trace:
    """A trace whose steps have the given (k, num_accepted) shapes; each cache starts where it ended."""
    steps, context, draft_before = [], 10, None
    for index, (k, accepted) in enumerate(shapes):
        step = make_step(index, k, accepted, context, draft_before=draft_before)
        steps.append(step)
        context += step.num_emitted
        draft_before = step.kv_draft.after_cutoff
    output = tuple(t.id for step in steps for t in step.emitted)
    return Trace(config=SpecConfig(k=max(1, *(k for k, _ in shapes))), prompt=TextTokens("hi", tuple(range(10))),
                 output=TextTokens("out", output), steps=tuple(steps), wall_s=wall_s)
