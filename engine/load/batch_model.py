"""The cost model from one request to a batch (issue #39 item 3; docs/architecture.md §11): why speculation stops
paying as requests pile up.

Without speculation a step of N requests is one target forward over N tokens: t(N), and emits N tokens. With it,
a step verifies N × (k + 1) tokens in one target forward and drafts: vLLM's draft-model proposer runs the draft
once over every request's k + 1 verified positions (its padded drafter batch, the default), then k - 1 times over
one token a request. It emits τ tokens a request:

    step(N) = t(N (k + 1)) + draft(N)        ratio(N) = τ_N t(N) / step(N)

t is the forward probe's curve (engine/load/forward_probe.py, timed on the server without speculation, linear
between its sizes). The draft's part is calibrated once, at the grid's lowest N₀: the measured step there less
t(N₀ (k + 1)); above it, it grows as the target's forward over the same shapes would:
draft(N) = draft(N₀) [t(N (k + 1)) + (k - 1) t(N)] / [t(N₀ (k + 1)) + (k - 1) t(N₀)]. τ_N is each level's own
measured tokens per step (acceptance depends on the mix of prompts a level sends, not on load; the model prices
cost, not acceptance). So every step above N₀ is a prediction from the probe and N₀ alone. While the forward is
memory-bound, t(N (k + 1)) ≈ t(N) and the ratio is about τ over (1 + the draft's share); once N (k + 1) tokens
fill the machine, t(N (k + 1)) grows toward (k + 1) t(N) and the drafts' extra tokens are no longer free. The
model prices decode steps; the prompts' prefill, in both servers' measured walls, is not in it. Torch-free."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from engine.formats.trace import Trace

DISAGREE = 0.15          # the model and the measurement disagree when they differ by more than this share


@dataclass(frozen=True)
class ForwardCurve:
    """t(M): the median of the probe's timings at each size, linear between sizes and beyond the last two."""

    sizes: tuple[int, ...]
    seconds: tuple[float, ...]

    @classmethod
    def of(cls, probe: dict[str, Any]) -> "ForwardCurve":
        pairs = sorted((size, statistics.median(times)) for size, times in zip(probe["sizes"], probe["seconds"]))
        return cls(tuple(size for size, _ in pairs), tuple(seconds for _, seconds in pairs))

    def at(self, tokens: float) -> float:
        sizes, seconds = self.sizes, self.seconds
        if len(sizes) == 1:
            return seconds[0]
        upper = next((i for i, size in enumerate(sizes) if size >= tokens), len(sizes) - 1)
        upper = max(upper, 1)
        low, high = sizes[upper - 1], sizes[upper]
        share = (tokens - low) / (high - low)
        return max(seconds[upper - 1] + share * (seconds[upper] - seconds[upper - 1]), 0.0)


@dataclass(frozen=True)
class BatchPoint:
    """The model at one N: the plain step, the verify forward, the draft's part and what they predict."""

    n: int
    verify_tokens: int          # N (k + 1)
    plain_s: float              # t(N): a step without speculation
    verify_s: float             # t(N (k + 1))
    draft_s: float              # the drafts' forwards
    tokens_per_step: float      # τ, a request's tokens per speculative step

    @property
    def step_s(self) -> float:
        return self.verify_s + self.draft_s

    @property
    def ratio(self) -> float:
        """Speculation's throughput over the plain server's: τ N / step(N) against N / t(N)."""
        return self.tokens_per_step * self.plain_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def verify_growth(self) -> float:
        """How much longer the verify forward takes than the plain step's: t(N (k + 1)) / t(N)."""
        return self.verify_s / self.plain_s if self.plain_s > 0 else 0.0


@dataclass(frozen=True)
class BatchModel:
    """The predicted points of a grid and where the prediction was calibrated."""

    points: tuple[BatchPoint, ...]
    calibrated_n: int
    k: int

    def crossover(self) -> BatchPoint | None:
        """The first N whose predicted ratio falls below 1."""
        return next((point for point in self.points if point.ratio < 1.0), None)

    def at(self, n: int) -> BatchPoint | None:
        return next((point for point in self.points if point.n == n), None)


def draft_shape(curve: ForwardCurve, k: int, n: int) -> float:
    """What the drafts' forwards at N cost in the target's units: one over N (k + 1) tokens, k - 1 over N."""
    return curve.at(n * (k + 1)) + (k - 1) * curve.at(n)


def batch_model(curve: ForwardCurve, k: int, levels: Sequence[int], step_s: float,
                tokens_per_step: Mapping[int, float]) -> BatchModel:
    """The model over `levels`, calibrated at the lowest one, where a speculative step measured `step_s`;
    `tokens_per_step` is each level's measured tokens per step per request."""
    n0 = min(levels)
    draft0 = max(step_s - curve.at(n0 * (k + 1)), 0.0)
    base = draft_shape(curve, k, n0)
    points = tuple(BatchPoint(n, n * (k + 1), curve.at(n), curve.at(n * (k + 1)),
                              draft0 * draft_shape(curve, k, n) / base if base > 0 else draft0, tokens_per_step[n])
                   for n in sorted(levels))
    return BatchModel(points, n0, k)


def why_sentence(model: BatchModel) -> str:
    """Why speculation stops paying (or does not) in the model, with the verify forward's growth named."""
    crossing = model.crossover()
    k = model.k
    point = crossing or model.points[-1]
    cost = point.step_s / point.plain_s if point.plain_s > 0 else 0.0
    if crossing is None:
        return (f"The model predicts speculation still pays at N = {point.n}: verifying {point.n} × ({k} + 1) = "
                f"{point.verify_tokens} tokens takes {point.verify_growth:.1f}× the {point.n}-token forward of a "
                f"plain step; with the drafts' forwards a speculative step takes {cost:.1f}× a plain step and brings "
                f"each request {point.tokens_per_step:.2f} tokens to the plain step's 1.")
    return (f"The model predicts speculation stops paying at N = {point.n}: there the target verifies "
            f"{point.n} × ({k} + 1) = {point.verify_tokens} tokens a step, which the probe timed at "
            f"{point.verify_growth:.1f}× its {point.n}-token forward; with the drafts' own forwards a speculative "
            f"step takes {cost:.1f}× a plain step but brings each request only {point.tokens_per_step:.2f} tokens to "
            "the plain step's 1. The target's forward is no longer memory-bound (reading its weights no longer "
            "dominates; the arithmetic over the extra tokens does): the drafts' extra tokens are no longer free.")


def later_steps(trace: Trace) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """A request's measured steps after its first (the first holds the queue and the prompt's prefill): each one's
    time in ms (the gap before it reached the client) and the tokens it emitted; none when its steps are not the
    server's own (a trace whose per-step counts never arrived)."""
    if trace.split is not None:
        return (), ()
    later = trace.steps[1:]
    return tuple(step.timing.total for step in later), tuple(step.num_emitted for step in later)


def document_model(document: dict[str, Any]) -> BatchModel | None:
    """The model of a load run the reader checked: its baseline's forward probe, calibrated at the lowest N's
    measured steps, each level's τ its requests' measured steps (None without a probe, or a level without a
    measured step)."""
    probe = document["servers"][1].get("forward_probe")
    if not probe:
        return None
    steps = {level["concurrency"]: [later_steps(Trace.from_dict(r["trace"])) for r in level["requests"]
                                    if r.get("trace") is not None] for level in document["servers"][0]["levels"]}
    return measured_model(probe, document["pair"]["k"], steps)


def measured_model(probe: dict[str, Any], k: int,
                   steps: Mapping[int, Sequence[tuple[Sequence[float], Sequence[int]]]]) -> BatchModel | None:
    """The model from the forward probe and, per N, its requests' measured steps after their first (`later_steps`:
    times in ms, emitted tokens): calibrated at the lowest N, each N's τ its own (None without a level, or a level
    without a measured step)."""
    step_s: dict[int, float] = {}
    tokens: dict[int, float] = {}
    for n, requests in steps.items():
        times = [ms for ms_list, _ in requests for ms in ms_list]
        if not times:
            return None
        step_s[n] = sum(times) / len(times) / 1000
        tokens[n] = sum(sum(emitted) for _, emitted in requests) / len(times)
    if not step_s:
        return None
    return batch_model(ForwardCurve.of(probe), k, list(step_s), step_s[min(step_s)], tokens)


def disagreements(model: BatchModel, measured: dict[int, float]) -> list[tuple[int, float, float]]:
    """(N, predicted, measured) wherever the predicted ratio and the measured one differ by more than DISAGREE."""
    return [(n, point.ratio, ratio) for n, ratio in sorted(measured.items())
            if (point := model.at(n)) is not None and ratio > 0 and abs(point.ratio / ratio - 1) > DISAGREE]
