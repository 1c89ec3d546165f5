"""One measured row: tokens and wall time per prompt, the engine's counts, and the theory.

Theory: E(a, k) / (k c + 1) with a the mean per-position overlap sum_x min(p, q), k the
mean draft length and c = draft ms per token over a target-only step (of the stock
reference); "theory at v" is E(a, k) / (k c + v) with v the measured verify forward over
one target-only step, what the measured verify cost allows: measured over it is the
engine's own overhead (sampling, cache cutoff, recording).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.metrics import expected_speedup, expected_tokens_per_step


@dataclass
class Row:
    name: str
    temperature: float
    tokens: int = 0
    wall_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    verify_steps: int = 0                 # steps that verified drafts (k > 0): τ's steps, as vLLM counts them
    alpha: list[float] = field(default_factory=list)
    draft_ms: float = 0.0                 # summed over steps, for the cost ratio c
    verify_ms: float = 0.0
    engine_ms: float = 0.0                # summed over steps: acceptance, the copy to the host, cutoff, emit
    steps_ms: float = 0.0                 # the steps' own wall clock; the rest of wall_s is outside any step
    prefill_ms: float = 0.0               # target-only rows: the first forward (prompt + first token)
    identical: bool | None = None
    per_prompt: dict[str, tuple[int, float]] = field(default_factory=dict)   # name -> (tokens, wall_s)

    def add(self, name: str, tokens: int, wall_s: float) -> None:
        self.tokens += tokens
        self.wall_s += wall_s
        self.per_prompt[name] = (tokens, wall_s)

    def prompt_tokens_per_s(self, name: str) -> float:
        tokens, wall = self.per_prompt.get(name, (0, 0.0))
        return tokens / wall if wall else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0

    def phases(self, kind: str) -> dict[str, float] | None:
        """Where the row's time went, in milliseconds per generated token (issue #40 item 4); the parts sum to its
        wall time per token. A speculative row (kind "engine"): draft (its forwards and choosing its tokens),
        verify (the target's forward over the pending tokens and k drafts, the first step's over the whole prompt,
        and its probabilities), accept_cut_emit (acceptance, the step's copy to the host, the caches' cutoff,
        emitting), outside_steps (recording each step, tokenizing, the Python between steps). A target-only row of
        SpecViz's loop (kind "target-only"): prefill (the first forward, prompt and first token) and decode (each
        later token's forward and choice). None for rows this process does not time inside."""
        if not self.tokens:
            return None
        wall_ms = 1000 * self.wall_s
        if kind == "engine" and self.steps_ms:
            parts = {"draft": self.draft_ms, "verify": self.verify_ms, "accept_cut_emit": self.engine_ms,
                     "outside_steps": wall_ms - self.steps_ms}
        elif kind == "target-only" and self.prefill_ms:
            parts = {"prefill": self.prefill_ms, "decode": wall_ms - self.prefill_ms}
        else:
            return None
        return {name: round(ms / self.tokens, 3) for name, ms in parts.items()}


def timed(run: Callable[[], object], repeats: int) -> tuple[object, float]:
    """The median wall time of `repeats` runs and the result of the run nearest it (so phases measured inside
    that run add up to about the time kept)."""
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        runs.append((time.perf_counter() - started, result))
    median = statistics.median(wall for wall, _ in runs)
    return min(runs, key=lambda run_: abs(run_[0] - median))[1], median


def target_step_ms(target: Row) -> float:
    """Milliseconds per token of target-only decoding: one target step."""
    return 1000 * target.wall_s / target.tokens


def _measured_alpha_and_k(row: Row, target: Row) -> tuple[float, int] | None:
    """The row's mean per-position overlap a (clamped below 1) and mean draft length k, if measured."""
    if not row.alpha or not row.drafted or not row.steps or not target.tokens:
        return None
    return min(statistics.fmean(row.alpha), 0.999999), max(1, round(row.drafted / (row.verify_steps or row.steps)))


def theory(row: Row, target: Row) -> float | None:
    """E(a, k) / (k c + 1) for the row's measured a, mean k and c (draft ms per token over a target step)."""
    measured = _measured_alpha_and_k(row, target)
    if measured is None:
        return None
    alpha, k = measured
    return expected_speedup(alpha, k, row.draft_ms / row.drafted / target_step_ms(target))


def theory_at_measured_verify(row: Row, target: Row) -> float | None:
    """E(a, k) / (k c + v): the theory with the verify forward at its measured cost v (in target steps)."""
    measured = _measured_alpha_and_k(row, target)
    if measured is None:
        return None
    alpha, k = measured
    step = target_step_ms(target)
    return expected_tokens_per_step(alpha, k) / (row.draft_ms / row.steps / step + row.verify_ms / row.steps / step)
