"""Hand-built races (engine/formats/race.py) for UI and reader tests: no model, chosen timings."""

from __future__ import annotations

from typing import Sequence

from engine.config import SpecConfig
from engine.formats.race import LaneToken, Race, RaceStep, SpeculativeLane, TargetOnlyLane, TimedToken


def make_race(accepted: Sequence[int] = (3, 1, 0, 3, 2), k: int = 3, token_s: float = 0.2, step_s: float = 0.3,
              prompt: str = "def f(x):", config: SpecConfig | None = None) -> Race:
    """A greedy race: the speculative lane's steps accept `accepted` drafts each (then a recovered token, or a
    bonus after k accepted), every step taking `step_s`; the target-only lane makes the same tokens,
    one every `token_s` seconds."""
    steps, t_s, next_id = [], 0.0, 100
    for count in accepted:
        tokens = [LaneToken(next_id + i, f" t{next_id + i}", "accepted") for i in range(count)]
        tokens.append(LaneToken(next_id + count, f" t{next_id + count}", "bonus" if count == k else "recovered"))
        next_id += count + 1
        t_s += step_s
        steps.append(RaceStep(round(t_s, 6), tuple(tokens)))
    ids = [token for step in steps for token in step.tokens]
    slow = tuple(TimedToken(LaneToken(token.id, token.text), round(token_s * (i + 1), 6)) for i, token in enumerate(ids))
    config = config or SpecConfig(k=k, max_new_tokens=max(len(ids), 1), target="tiny-random/target",
                                  draft="tiny-random/draft")
    return Race(prompt, config, TargetOnlyLane(slow, round(token_s * len(ids), 6)),
                SpeculativeLane(tuple(steps), round(t_s, 6)), warmup_tokens=2)
