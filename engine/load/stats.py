"""The statistics of one load level from its requests' times and counts: percentiles (linear
interpolation between closest ranks, numpy's default), aggregate tokens/s = output tokens / wall,
per-request tokens/s = the tokens that came after the request's first chunk over its own (done - first
token): vLLM merges engine steps into one chunk when the client lags, so counting the first chunk's tokens
over that span would divide many tokens by almost no time (None when one chunk brought them all)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from engine.metrics import tokens_per_verify_step


@dataclass(frozen=True)
class RequestTimes:
    """One request's clock readings, in seconds from the level's first send, and its output tokens."""

    prompt_index: int
    sent_s: float
    first_token_s: float
    done_s: float
    output_tokens: int
    first_chunk_tokens: int = 1         # the tokens of the first chunk (vLLM merges steps when the client lags)

    @property
    def latency_s(self) -> float:
        return self.done_s - self.sent_s

    @property
    def time_to_first_token_s(self) -> float:
        return self.first_token_s - self.sent_s

    @property
    def tokens_per_s(self) -> float | None:
        """The tokens after the first chunk over (done - first token); None when one chunk brought them all."""
        span = self.done_s - self.first_token_s
        later = self.output_tokens - self.first_chunk_tokens
        return later / span if later > 0 and span > 0 else None


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0..1) quantile with linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    place = share * (len(ordered) - 1)
    low, high = math.floor(place), math.ceil(place)
    return ordered[low] + (ordered[high] - ordered[low]) * (place - low)


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5), "p90": percentile(values, 0.9), "p99": percentile(values, 0.99)}


def median_request_speed(requests: Sequence[RequestTimes]) -> float:
    """What one user waits: the median request's output tokens / its time from sent to done (0 with none timed)."""
    speeds = [r.output_tokens / r.latency_s for r in requests if r.latency_s > 0]
    return percentile(speeds, 0.5) if speeds else 0.0


def level_summary(requests: Sequence[RequestTimes]) -> dict[str, object]:
    """The level's figures (specviz.load/1): wall is the first send to the last done."""
    wall = max(r.done_s for r in requests) - min(r.sent_s for r in requests)
    tokens = sum(r.output_tokens for r in requests)
    speeds = [speed for speed in (r.tokens_per_s for r in requests) if speed is not None]
    return {"wall_s": wall, "output_tokens": tokens,
            "aggregate_tokens_per_s": tokens / wall if wall > 0 else 0.0,
            "latency_s": spread([r.latency_s for r in requests]),
            "first_token_s": spread([r.time_to_first_token_s for r in requests]),
            "tokens_per_s_per_request": ({"p50": percentile(speeds, 0.5), "mean": sum(speeds) / len(speeds)}
                                         if speeds else None)}


def acceptance(per_step: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, float | int | None]:
    """Acceptance over the requests' own per-step counts [(accepted, drafted), ...]: τ over the steps that
    drafted (engine/metrics.py, vLLM's mean_acceptance_length)."""
    drafted = sum(sum(d) for _, d in per_step)
    accepted = sum(sum(a) for a, _ in per_step)
    steps = sum(sum(1 for n in d if n > 0) for _, d in per_step)
    return {"drafted": drafted, "accepted": accepted, "rate": accepted / drafted if drafted else None,
            "tau": tokens_per_verify_step(accepted, steps)}


def aggregate_ratios(document: dict[str, Any]) -> dict[int, float]:
    """Per N, the speculative server's aggregate tokens/s over the plain server's (N where the plain made none is
    left out): the measured ratio every reader of a load run draws or prints."""
    spec, plain = document["servers"]
    return {a["concurrency"]: a["aggregate_tokens_per_s"] / b["aggregate_tokens_per_s"]
            for a, b in zip(spec["levels"], plain["levels"]) if b["aggregate_tokens_per_s"] > 0}


def measured_crossover(ratios: dict[int, float]) -> int | None:
    """The first N (in the grid's order) whose ratio falls below 1: where speculation stops paying."""
    return next((n for n, ratio in ratios.items() if ratio < 1.0), None)


def other_traffic(levels: Sequence[dict[str, Any]]) -> list[int]:
    """The speculative server's levels (their N) whose /metrics counters moved by other than the level's own requests'
    drafted and accepted tokens: the server served other requests meanwhile, and the level's numbers include them."""
    shared = []
    for level in levels:
        before, after, own = level.get("counters_before"), level.get("counters_after"), level.get("acceptance")
        if not (isinstance(before, dict) and isinstance(after, dict) and isinstance(own, dict)):
            continue
        moved = (after["num_draft_tokens"] - before["num_draft_tokens"],
                 after["num_accepted_tokens"] - before["num_accepted_tokens"])
        if moved != (own["drafted"], own["accepted"]):
            shared.append(level["concurrency"])
    return shared
