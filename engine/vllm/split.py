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

The split uses every array entry once, in order, cuts only the last step, and places a one-token step
that verified nothing where the lookup found no match: that placement is unique. Only when it does not
fit does the split also place such steps where a preemption would have, never letting a step span two
chunks (where the chunk boundaries leave it open, the first placement in stream order is taken).
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
    steps = _place(chunks, metrics, proposer, prompt_ids, False)
    if steps is None and preemptions:
        steps = _place(chunks, metrics, proposer, prompt_ids, True)
    if steps is None:
        tokens = sum(len(chunk.token_ids) for chunk in chunks)
        raise VllmError(f"The server's per-step counts ({len(metrics.per_step_accepted)} verify steps) do not split "
                        f"its {tokens} tokens: the method or n-gram lookup SpecViz was told differs from the server's.")
    return steps


def _place(chunks: Sequence[StreamChunk], metrics: SpecMetrics, proposer: Proposer | None,
           prompt_ids: Sequence[int], preemptions: bool) -> list[StepTokens] | None:
    """The first placement (depth first, the array's step before a preemption's) or None; with
    `preemptions`, one-token steps outside the arrays may be placed, and no step spans two chunks."""
    tokens = [(token, number, chunk.time_s) for number, chunk in enumerate(chunks) for token in chunk.token_ids]
    ids = [token for token, _, _ in tokens]
    arrays = list(zip(metrics.per_step_drafted, metrics.per_step_accepted))
    end = (len(tokens), len(arrays))

    def options(position: int, used: int) -> Iterator[tuple[int, int, int, int, tuple[int, ...]]]:
        """(length, drafted, accepted, next used, proposal) of each step that may start here."""
        if position >= len(tokens):
            return
        if position == 0:
            yield 1, 0, 0, used, ()          # the prefill's token
            return
        proposal = proposer(list(prompt_ids) + ids[:position]) if proposer is not None else ()
        if proposer is not None and not proposal:
            yield 1, 0, 0, used, proposal    # the lookup found no match: nothing drafted
            return
        if used < len(arrays):
            drafted, accepted = arrays[used]
            length = accepted + 1
            if used == len(arrays) - 1 and position + length > len(tokens):
                length = len(tokens) - position     # the last step, cut by the budget or a stop
            yield length, drafted, accepted, used + 1, proposal
        if preemptions:
            yield 1, 0, 0, used, ()          # recomputed after a preemption: nothing verified

    def fits(position: int, length: int) -> bool:
        last = position + length - 1
        return last < len(tokens) and (not preemptions or tokens[position][1] == tokens[last][1])

    dead: set[tuple[int, int]] = set()
    stack = [((0, 0), options(0, 0))]
    path: list[StepTokens] = []
    while stack:
        state, choices = stack[-1]
        if state == end:
            return path
        for length, drafted, accepted, used, proposal in choices:
            following = (state[0] + length, used)
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
