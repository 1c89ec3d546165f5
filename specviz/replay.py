"""Replay a recorded trace as if it were running: the trace cut after its first n steps."""

from __future__ import annotations

import dataclasses

from engine.trace import TextTokens, Trace


def first_steps(trace: Trace, count: int) -> Trace:
    """`trace` as it stood after `count` steps (marked incomplete unless that is all of it)."""
    steps = trace.steps[:count]
    emitted = [token for step in steps for token in step.emitted]
    wall_s = trace.wall_s * (sum(step.timing.total for step in steps) /
                             max(sum(step.timing.total for step in trace.steps), 1e-9))
    return dataclasses.replace(
        trace, steps=steps, output=TextTokens("".join(token.text for token in emitted),
                                              tuple(token.id for token in emitted)),
        wall_s=wall_s, baseline=trace.baseline if count >= len(trace.steps) else None,
        complete=trace.complete and count >= len(trace.steps))
