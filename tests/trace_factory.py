"""Hand-built traces for UI tests: consistent step records without any model.

`make_trace([4, 1, 0, 4], k=4)` gives four steps that accepted 4 (bonus), 1, 0 and 4
drafts, with cache lengths following docs/architecture.md §2 (target cut k - accepted,
draft cut max(0, k - accepted - 1), no stale positions), carryover after each step,
and in sampling mode q, p, min(1, p/q), draws and a residual at each rejection.
`with_stale(trace)` turns the cache records into a lab run's that cuts nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from engine.config import SpecConfig
from engine.metrics import BaselineStats
from engine.records import (Alternative, CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming,
                            TargetToken, Token)
from engine.formats.trace import TextTokens, Trace

V1_FIXTURE = Path(__file__).parent / "data" / "trace-v1-lab-A.json"   # 7 steps of lab-A as specviz.trace/1 wrote them

WORDS = ("def", " is", "_pal", "ind", "rome", "(s", ":", " str", ")", " ->", " bool", ":\n", "    ", "return",
         " s", " ==", " s", "[::-", "1", "]\n", " <b>", " &amp;", "\t", " the")


def _token(seed: int) -> tuple[int, str]:
    return 1000 + seed, WORDS[seed % len(WORDS)]


def _top(seed: int, first_id: int, first_text: str, first_prob: float) -> tuple[Alternative, ...]:
    others = [_token(seed + 7 + i) for i in range(2)]
    rest = (1.0 - first_prob) / 3
    return (Alternative(first_id, first_text, first_prob),) + tuple(Alternative(i, t, rest) for i, t in others)


def make_step(index: int, context_len: int, k: int, num_accepted: int, carryover: Sequence[Token] = (),
              first: bool = False, sampling: bool = False, ngram: bool = False, eos: bool = False) -> StepRecord:
    seed = index * 31
    drafts, targets, verdicts, accept_prob, draws = [], [], [], [], []
    for position in range(k):
        draft_id, draft_text = _token(seed + position)
        verdict = ("accepted" if position < num_accepted else "rejected" if position == num_accepted else "unverified")
        q = None if ngram else 0.6
        p = 0.9 if verdict == "accepted" else 0.2
        drafts.append(DraftToken(draft_id, draft_text, q, () if ngram else _top(seed, draft_id, draft_text, 0.6)))
        target_id, target_text = (draft_id, draft_text) if verdict == "accepted" else _token(seed + position + 50)
        targets.append(TargetToken(target_id, target_text, p, _top(seed + 3, target_id, target_text, 0.7)))
        verdicts.append(verdict)
        ratio = min(1.0, p / (q or 1.0))
        accept_prob.append(ratio if sampling else None)
        draws.append((ratio * 0.5 if verdict == "accepted" else min(0.99, ratio + 0.1)) if sampling else None)
    bonus_id, bonus_text = _token(seed + 99)
    targets.append(TargetToken(bonus_id, bonus_text, None, _top(seed + 5, bonus_id, bonus_text, 0.8)))
    emitted = [EmittedToken(d.id, d.text, "accepted") for d in drafts[:num_accepted]]
    if num_accepted == k:
        emitted.append(EmittedToken(bonus_id, bonus_text, "bonus"))
    else:
        recovered = targets[num_accepted]
        emitted.append(EmittedToken(recovered.id, recovered.text, "recovered"))
    residual = ()
    if sampling and num_accepted < k:
        recovered = targets[num_accepted]
        residual = (Alternative(recovered.id, recovered.text, 0.55), Alternative(*_token(seed + 60), 0.3),
                    Alternative(*_token(seed + 61), 0.15))
    target_before = 0 if first else context_len - 1
    kv_target = CacheLengths(target_before, context_len + k, k - num_accepted, context_len + num_accepted, 0)
    kv_draft = None
    if not ngram:
        draft_before = 0 if first else context_len - len(carryover)
        cut = max(0, k - num_accepted - 1)
        kv_draft = CacheLengths(draft_before, context_len + k - 1, cut, context_len + k - 1 - cut, 0)
    return StepRecord(
        index=index, context_len=context_len, k=k, carryover=tuple(carryover), draft=tuple(drafts),
        target=tuple(targets), verdicts=tuple(verdicts), accept_prob=tuple(accept_prob), draws=tuple(draws),
        num_accepted=num_accepted, emitted=tuple(emitted), kv_target=kv_target, kv_draft=kv_draft,
        timing=StepTiming(draft=12.0 * k, verify=40.0, total=12.0 * k + 45.0), eos=eos, residual=residual,
        overlap=tuple(0.7 for _ in range(k)))


def make_steps(accepted: Sequence[int], k: int | Sequence[int] = 4, prompt_len: int = 12, sampling: bool = False,
               ngram: bool = False, eos_last: bool = False) -> list[StepRecord]:
    ks = [k] * len(accepted) if isinstance(k, int) else list(k)
    steps, context, carry = [], prompt_len, ()
    for index, (num, step_k) in enumerate(zip(accepted, ks)):
        step = make_step(index, context, step_k, num, carryover=carry, first=index == 0, sampling=sampling,
                         ngram=ngram, eos=eos_last and index == len(accepted) - 1)
        steps.append(step)
        context += step.num_emitted
        if not ngram:
            carry = tuple(Token(t.id, t.text) for t in ((step.draft[-1], step.emitted[-1]) if num == step_k and step_k
                                                        else step.emitted[-1:]))
    return steps


def make_trace(accepted: Sequence[int], k: int | Sequence[int] = 4, sampling: bool = False, ngram: bool = False,
               complete: bool = True, baseline: BaselineStats | None = None, prompt: str = "Write a palindrome check",
               target_dtype: str = "float32") -> Trace:
    """A trace whose step i accepted `accepted[i]` drafts."""
    steps = make_steps(accepted, k, sampling=sampling, ngram=ngram)
    return trace_from_steps(steps, sampling=sampling, ngram=ngram, complete=complete, baseline=baseline,
                            prompt=prompt, target_dtype=target_dtype)


def trace_from_steps(steps: Sequence[StepRecord], sampling: bool = False, ngram: bool = False, complete: bool = True,
                     baseline: BaselineStats | None = None, prompt: str = "Write a palindrome check",
                     target_dtype: str = "float32") -> Trace:
    max_k = max((s.k for s in steps), default=4)
    config = SpecConfig(k=max(1, max_k), temperature=0.8 if sampling else 0.0, max_new_tokens=256, seed=0,
                        drafter="ngram" if ngram else "model", draft="" if ngram else "tiny-draft", target="tiny-target",
                        device="cpu", draft_dtype="float32", target_dtype=target_dtype)
    emitted = [t for s in steps for t in s.emitted]
    return Trace(config=config, prompt=TextTokens(prompt, tuple(range(12))),
                 output=TextTokens("".join(t.text for t in emitted), tuple(t.id for t in emitted)),
                 steps=tuple(steps), wall_s=0.05 * len(steps) + 0.01, baseline=baseline, complete=complete)


def with_stale(trace: Trace, zero_fill: bool = False) -> Trace:
    """`trace` as the lab's cutoff mode "none" (or "zero_fill") records it: no position is cut,
    each step's rejected positions stay as stale ones, so every length grows by what was cut."""
    steps, grown = [], {"target": 0, "draft": 0}
    for step in trace.steps:
        caches = {}
        for name, cache in (("target", step.kv_target), ("draft", step.kv_draft)):
            if cache is None:
                caches[name] = None
                continue
            before = cache.before + grown[name] if cache.before else 0
            grown[name] += cache.cutoff
            caches[name] = CacheLengths(before, cache.after_forward + grown[name] - cache.cutoff, 0,
                                        cache.after_cutoff + grown[name], grown[name])
        steps.append(dataclasses.replace(step, kv_target=caches["target"], kv_draft=caches["draft"]))
    config = trace.config.replace(cutoff_mode="zero_fill" if zero_fill else "none")
    return dataclasses.replace(trace, config=config, steps=tuple(steps))


def html_trace() -> Trace:
    """A two-step trace whose first draft token, and output, hold markup that must be escaped."""
    steps = make_steps([0, 4], sampling=True)
    first = steps[0]
    evil = dataclasses.replace(first.draft[0], text="<script>")
    recovered = dataclasses.replace(first.emitted[0], text="<img src=x onerror=alert(1)>")
    steps[0] = dataclasses.replace(first, draft=(evil, *first.draft[1:]), emitted=(recovered,))
    return trace_from_steps(steps, sampling=True, prompt="<b>bold?</b> & more")
