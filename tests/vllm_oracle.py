"""The oracle for a vLLM trace (issue 38): SpecViz's own engine, on the same weights in float32, greedy,
with the same drafter and k, must take the same steps as the server did.

vLLM's prefill emits the first token alone and drafts after it; SpecViz's first step verifies drafts
with the prompt. So SpecViz runs from the prompt *and* the server's first token (checked against
SpecViz's own target-only first token), and each of the server's later steps must start where one of
SpecViz's does (output positions from the second token on), verify as many drafts, accept as many, and
emit SpecViz's tokens. SpecViz's budget is the server's output plus k + 1, so its own budget never
shortens a draft inside the server's output: the step the server's budget or a stop cut is compared as
far as the budget allows (the tokens it emitted are a prefix of SpecViz's; its accepted count, which vLLM
takes before it truncates, is SpecViz's). Where the tokens differ the report names the target's top-2
logit margin there (a near tie, or a real disagreement), never passing it silently.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER, SpecConfig
from engine.decode.baseline import target_only
from engine.decode.drafters import Proposal
from engine.decode.generation import Generation
from engine.decode.pair import ModelPair
from engine.metrics import NEAR_TIE_LOGITS
from engine.formats.trace import TextTokens, Trace
from engine.records import CacheLengths, StepRecord
from engine.vllm.ngram import propose


class VllmLookup:
    """A Drafter (engine/decode/drafters.py's protocol) proposing by vLLM's own n-gram rule (engine/vllm/ngram.py),
    so SpecViz's engine drafts what an n-gram server drafts."""

    def __init__(self, min_n: int, max_n: int, max_model_len: int | None):
        self.min_n, self.max_n, self.max_model_len = min_n, max_n, max_model_len

    def propose(self, committed: list[int], k: int) -> Proposal:
        return Proposal(list(propose(committed, self.min_n, self.max_n, k, self.max_model_len)) if k else [], None)

    def on_verified(self, proposal: Proposal, num_kept: int) -> CacheLengths | None:
        return None


@dataclass(frozen=True)
class Agreement:
    steps_compared: int          # the server's verify steps checked against SpecViz's
    cut_steps: int               # of them, steps the output ended inside (accepted drafts not emitted)
    problems: tuple[str, ...]    # empty when SpecViz's engine took the same steps


@dataclass(frozen=True)
class Reference:
    """SpecViz's side, worked out without the server: the target-only first token, then the engine's steps
    from the prompt and that token, and the target's top-2 margin before each token of that output."""

    prompt: tuple[int, ...]
    first: int
    steps: tuple[StepRecord, ...]
    margins: tuple[float, ...]          # before output token 0, 1, ... (the first token's included)

    @property
    def output(self) -> list[int]:
        return [self.first] + [token.id for step in self.steps for token in step.emitted]


def own_steps(pair: ModelPair, context: Sequence[int], config: SpecConfig,
              max_model_len: int | None = None) -> list[StepRecord]:
    """SpecViz's engine from `context` (float32 greedy, config's k, drafter and budget): its steps."""
    drafter = (VllmLookup(config.ngram_min, config.ngram_max, max_model_len)
               if config.drafter == NGRAM_DRAFTER else None)
    generation = Generation(pair, "", list(context), config.replace(temperature=0.0), drafter=drafter)
    steps = []
    while not generation.is_done:
        steps.append(generation.step())
    return steps


def reference(pair: ModelPair, prompt: Sequence[int], tokens: int, config: SpecConfig,
              max_model_len: int | None = None) -> Reference:
    """SpecViz's side for a server run of at most `tokens` tokens with `config`'s k and drafter (its lookup):
    SpecViz's budget is tokens + k, so its own budget never shortens a draft inside the server's output."""
    if config.drafter == MODEL_DRAFTER and pair.draft is None:
        raise ValueError("the pair has no draft model")
    prompt = list(prompt)
    first = target_only(pair, prompt, SpecConfig(max_new_tokens=1)).token_ids[0]
    steps = own_steps(pair, prompt + [first], config.replace(max_new_tokens=tokens + config.k, raw=True),
                      max_model_len)
    output = [first] + [token.id for step in steps for token in step.emitted]
    with torch.inference_mode():
        logits = pair.target(input_ids=torch.tensor([prompt + output])).logits[0, len(prompt) - 1:-1, :pair.vocab_size]
    top = torch.topk(logits.float(), 2).values
    return Reference(tuple(prompt), first, tuple(steps), tuple((top[:, 0] - top[:, 1]).tolist()))


def compare(trace: Trace, ours: Reference) -> Agreement:
    """Check `trace` (a vLLM server's, split by engine/vllm/) step by step against SpecViz's engine."""
    output, own_output = list(trace.output.token_ids), ours.output
    problems: list[str] = []
    if tuple(trace.prompt.token_ids) != ours.prompt:
        problems.append("the server tokenized the prompt otherwise than SpecViz's reference")
    differ = next((i for i, (a, b) in enumerate(zip(output, own_output)) if a != b), None)
    if differ is not None:
        problems.append(f"token {differ}: the server emitted {output[differ]}, SpecViz {own_output[differ]} "
                        f"(the target's top-2 logit margin there: {ours.margins[differ]:.4g})")
    if differ == 0:
        return Agreement(0, 0, tuple(problems))
    starts, position = {}, 1
    for step in ours.steps:
        starts[position] = step
        position += step.num_emitted
    compared = cut = 0
    position = trace.steps[0].num_emitted if trace.steps else 0
    for index, step in enumerate(trace.steps[1:], start=1):
        if differ is not None and position + step.num_emitted > differ:
            break                           # past a disagreement in the tokens: reported above
        mine = starts.get(position)
        if mine is None:
            problems.append(f"step {index} starts at output token {position}, where no step of SpecViz's starts")
            break
        theirs = [token.id for token in step.emitted]
        if (step.k, step.num_accepted) != (mine.k, mine.num_accepted):
            problems.append(f"step {index} (output token {position}): the trace says {step.num_accepted} of {step.k} "
                            f"drafts accepted, SpecViz's engine {mine.num_accepted} of {mine.k}")
        last = index == len(trace.steps) - 1
        expected = [token.id for token in mine.emitted]
        if theirs != expected[:len(theirs)] or (not last and len(theirs) != len(expected)):
            problems.append(f"step {index} (output token {position}) emits {theirs}, SpecViz's {expected}")
        compared += 1
        cut += len(theirs) < step.num_accepted + 1
        position += step.num_emitted
    return Agreement(compared, cut, tuple(problems))


def agree_up_to_a_near_tie(trace: Trace, ours: Reference, what: str) -> Agreement:
    """`compare` on real weights, where vLLM's kernels may round a near tie the other way: every step compared
    must agree, and a token that differs must sit at a top-2 margin under NEAR_TIE_LOGITS; such a tie is
    reported as a warning naming `what` and its margin, never passed silently (past it the runs part, so the
    steps before it are what is compared)."""
    agreement = compare(trace, ours)
    token_problems = [problem for problem in agreement.problems if problem.startswith("token ")]
    step_problems = [problem for problem in agreement.problems if not problem.startswith("token ")]
    assert step_problems == [], step_problems
    for problem in token_problems:
        margin = float(problem.rsplit(": ", 1)[1].rstrip(")"))
        assert margin < NEAR_TIE_LOGITS, problem
        warnings.warn(f"near tie ({what}): {problem}")
    return agreement


def compare_recomputed(pair: ModelPair, trace: Trace, max_model_len: int | None = None) -> Agreement:
    """`compare` for a run vLLM preempted: after each step that verified nothing past the prefill (a
    recomputation), SpecViz's engine restarts from the context there, as vLLM did; each stretch of the run
    between such steps is compared on its own (its first token against SpecViz's target-only token)."""
    prompt, output = list(trace.prompt.token_ids), list(trace.output.token_ids)
    compared = cut = 0
    problems: list[str] = []
    starts = [i for i, step in enumerate(trace.steps) if step.k == 0] + [len(trace.steps)]
    position = 0
    for first, end in zip(starts, starts[1:]):
        steps = trace.steps[first:end]
        emitted = [token.id for step in steps for token in step.emitted]
        stretch = dataclasses.replace(trace, prompt=TextTokens("", tuple(prompt + output[:position])),
                                      output=TextTokens("", tuple(emitted)), steps=steps)
        found = compare(stretch, reference(pair, prompt + output[:position], len(emitted), trace.config,
                                           max_model_len))
        compared, cut = compared + found.steps_compared, cut + found.cut_steps
        problems += [f"from output token {position}: {problem}" for problem in found.problems]
        position += len(emitted)
    return Agreement(compared, cut, tuple(problems))
