"""A vLLM stream's output in engine steps (docs/architecture.md §10): by the server's per-step arrays once
they arrive, else one provisional step per chunk.

What vLLM 0.32 reports, read in its source (vllm/v1/core/sched/scheduler.py `update_from_output`):
- a step's accepted count is taken from the sampled ids *before* `_update_request_with_output` trims
  them at a stop (max_tokens, an EOS, a stop token), and the detokenizer drops tokens past a stop
  string afterwards (vllm/v1/engine/output_processor.py `_trim_surplus_tokens`); so the run's last
  step may emit fewer than accepted + 1 tokens (`StepTokens.cut`), never an earlier one;
- only steps that verified drafts are in the arrays: the prefill never is, an n-gram step whose lookup
  found nothing is not, and neither is the step after a preemption (`_preempt_request` clears the
  request's drafts, so the recomputation emits one token verifying nothing);
- one step's tokens arrive in one chunk (several steps may share one when the client lags).

The split uses every array entry once, in order, cuts only the last step, places a one-token step
that verified nothing where the lookup found no match, and lets no step span two chunks. Where that
does not fit, it also places one-token steps outside the arrays where a preemption would have (a
budget cut can hide one: the shifted steps still fit when the last step emits a token fewer, so the
chunk boundaries decide). Where they leave it open (the client lagged and chunks merged: the
earliest and the latest placement that fit differ) the run cannot be split (VllmError: kept
unsplit). Streams whose steps span chunks (none vLLM sends) are split by the counts alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from engine.vllm.stream import SpecMetrics, StreamChunk
from engine.vllm.transport import VllmError

Proposer = Callable[[Sequence[int]], tuple[int, ...]]   # context -> the drafts a deterministic rule proposes


@dataclass(frozen=True)
class StepTokens:
    """One engine step's slice of the output: its token ids, drafted and accepted counts (the server's),
    arrival time, and the drafts a deterministic rule (vLLM's n-gram lookup) proposed for it, when known."""

    token_ids: tuple[int, ...]
    drafted: int
    accepted: int
    time_s: float
    proposal: tuple[int, ...] = ()

    @property
    def cut(self) -> bool:
        """The output ended inside this step: the server accepted drafts it never emitted, or the target's
        own token was cut (vLLM counts accepted drafts before it truncates at the budget or a stop)."""
        return len(self.token_ids) < self.accepted + 1


def split_steps(chunks: Sequence[StreamChunk], metrics: SpecMetrics | None, k: int,
                proposer: Proposer | None = None, prompt_ids: Sequence[int] = (),
                preemptions: bool = True) -> list[StepTokens]:
    """The output's tokens in engine steps: by the per-step arrays when given, else `provisional_steps`.

    With `proposer` (the n-gram rule) the steps it finds no match for draft nothing (k = 0, one token).
    `preemptions`: when no placement fits without them, allow one-token steps outside the arrays where
    a preemption would put them. VllmError when the counts cannot split the tokens."""
    if metrics is None:
        return provisional_steps(chunks, k, proposer, prompt_ids)
    steps = _first(_place(chunks, metrics, proposer, prompt_ids, False, True))
    if steps is None and preemptions:
        late = _place(chunks, metrics, proposer, prompt_ids, True, True)
        steps = None if late is None else late[0]
        if late is not None and steps != _place(chunks, metrics, proposer, prompt_ids, True, True, True, late[1])[0]:
            raise VllmError("The server recomputed this request after a preemption, and its stream merged steps so "
                            "that where the recomputed steps fall cannot be told: its tokens are kept, unsplit.")
    if steps is None:
        steps = _first(_place(chunks, metrics, proposer, prompt_ids, False, False))
    if steps is None:
        tokens = sum(len(chunk.token_ids) for chunk in chunks)
        raise VllmError(f"The server's per-step counts ({len(metrics.per_step_accepted)} verify steps) do not split "
                        f"its {tokens} tokens: the method or n-gram lookup SpecViz was told differs from the server's.")
    return steps


def _first(found: tuple[list[StepTokens], int] | None) -> list[StepTokens] | None:
    return None if found is None else found[0]


def _place(chunks: Sequence[StreamChunk], metrics: SpecMetrics, proposer: Proposer | None,
           prompt_ids: Sequence[int], preemptions: bool, whole_chunks: bool, early: bool = False,
           limit: int | None = None) -> tuple[list[StepTokens], int] | None:
    """The first placement (depth first: the array's step before a preemption's, or the reverse when
    `early`) and how many preemption steps it placed, or None; with `preemptions`, up to `limit` (None:
    any number) one-token steps outside the arrays may be placed; with `whole_chunks`, no step spans two
    chunks."""
    tokens = [(token, number, chunk.time_s) for number, chunk in enumerate(chunks) for token in chunk.token_ids]
    ids = [token for token, _, _ in tokens]
    arrays = list(zip(metrics.per_step_drafted, metrics.per_step_accepted))
    end = (len(tokens), len(arrays))

    def options(position: int, used: int, extras: int) -> Iterator[tuple[int, int, int, tuple[int, int, int],
                                                                      tuple[int, ...]]]:
        """(length, drafted, accepted, the state after it, proposal) of each step that may start here."""
        if position >= len(tokens):
            return
        if position == 0:
            yield 1, 0, 0, (1, used, extras), ()         # the prefill's token
            return
        proposal = proposer(list(prompt_ids) + ids[:position]) if proposer is not None else ()
        if proposer is not None and not proposal:
            yield 1, 0, 0, (position + 1, used, extras), proposal     # the lookup found no match: nothing drafted
            return
        recomputed = preemptions and (limit is None or extras < limit)
        if recomputed and early:
            yield 1, 0, 0, (position + 1, used, extras + 1), ()      # recomputed after a preemption
        if used < len(arrays):
            drafted, accepted = arrays[used]
            length = accepted + 1
            if used == len(arrays) - 1 and position + length > len(tokens):
                length = len(tokens) - position     # the last step, cut by the budget or a stop
            yield length, drafted, accepted, (position + length, used + 1, extras), proposal
        if recomputed and not early:
            yield 1, 0, 0, (position + 1, used, extras + 1), ()

    def fits(position: int, length: int) -> bool:
        last = position + length - 1
        return last < len(tokens) and (not whole_chunks or tokens[position][1] == tokens[last][1])

    dead: set[tuple[int, int, int]] = set()
    stack = [((0, 0, 0), options(0, 0, 0))]
    path: list[StepTokens] = []
    while stack:
        state, choices = stack[-1]
        if state[:2] == end:
            return path, state[2]
        for length, drafted, accepted, following, proposal in choices:
            if fits(state[0], length) and following not in dead:
                part = tokens[state[0]:state[0] + length]
                path.append(StepTokens(tuple(token for token, _, _ in part), drafted, accepted, part[-1][2], proposal))
                stack.append((following, options(*following)))
                break
        else:
            dead.add(state)
            stack.pop()
            if path:
                path.pop()
    return None


def provisional_steps(chunks: Sequence[StreamChunk], k: int, proposer: Proposer | None,
                      prompt_ids: Sequence[int]) -> list[StepTokens]:
    """A live run's stand-in until the arrays arrive: the prefill's token, then each chunk as one step (of
    the rule's drafts, or k; a chunk longer than that plus one holds merged steps and is cut into fully
    accepted ones). Guesses: the trace says so (`Trace.split == "provisional"`)."""
    steps: list[StepTokens] = []
    context = list(prompt_ids)
    for chunk in chunks:
        ids = list(chunk.token_ids)
        while ids:
            proposal = proposer(context) if proposer is not None and steps else ()
            drafted = 0 if not steps else (len(proposal) if proposer is not None else k)
            part, ids = ids[:drafted + 1], ids[drafted + 1:]
            steps.append(StepTokens(tuple(part), drafted, len(part) - 1, chunk.time_s, proposal))
            context += part
    return steps


def unsplit_steps(chunks: Sequence[StreamChunk]) -> list[StepTokens]:
    """A run whose arrays never came (a cut stream, a time-out, a stop) or did not split: each token alone,
    with its arrival time and no verdicts (`Trace.split == "unsplit"`)."""
    return [StepTokens((token,), 0, 0, chunk.time_s) for chunk in chunks for token in chunk.token_ids]
