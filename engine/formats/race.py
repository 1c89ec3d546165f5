"""A race (`specviz.race/1`): one prompt decoded target-only, then speculatively, on the same
loaded models, with the wall-clock time at which every token appeared. Torch-free.

The Race tab replays the two lanes side by side at their recorded pace, so the record keeps
what a replay needs and nothing more: per lane the tokens (id, text) with their times, and
for the speculative lane the steps (one target forward each) that emitted them, every token
marked as an accepted draft, the target's recovered token or the bonus token. A lane's clock
starts before the prompt's prefill, so both lanes pay for reading the prompt.

    {schema, prompt, config {SpecConfig's fields}, warmup_tokens,
     target_only {wall_s, tokens[] {id, text, t_s}},
     speculative {wall_s, steps[] {t_s, tokens[] {id, text, kind}}}}

engine/formats/race_reader.py reads it back strictly (RaceFormatError names the bad field's path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import SpecConfig
from engine.formats.json_document import read_document

RACE_SCHEMA = "specviz.race/1"
MAX_RACE_BYTES = 5 * 1024 * 1024        # a race of 512 tokens per lane is about 100 KiB


class RaceFormatError(ValueError):
    """A race document that cannot be read; the message names the bad field's path."""


@dataclass(frozen=True)
class LaneToken:
    id: int
    text: str
    kind: str = "target"                # target (target-only lane) | accepted | recovered | bonus


@dataclass(frozen=True)
class TimedToken:
    """A target-only token and when it was chosen (seconds after the lane started)."""

    token: LaneToken
    t_s: float


@dataclass(frozen=True)
class RaceStep:
    """One speculative step: one target forward, the tokens it emitted, and when it ended."""

    t_s: float
    tokens: tuple[LaneToken, ...]

    @property
    def accepted(self) -> int:
        return sum(token.kind == "accepted" for token in self.tokens)


@dataclass(frozen=True)
class TargetOnlyLane:
    tokens: tuple[TimedToken, ...]
    wall_s: float

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(timed.token.id for timed in self.tokens)

    @property
    def forwards(self) -> int:
        """Target forwards: one per token."""
        return len(self.tokens)


@dataclass(frozen=True)
class SpeculativeLane:
    steps: tuple[RaceStep, ...]
    wall_s: float

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(token.id for step in self.steps for token in step.tokens)

    @property
    def forwards(self) -> int:
        """Target forwards: one verify per step."""
        return len(self.steps)


def tokens_per_s(count: int, wall_s: float) -> float | None:
    return count / wall_s if wall_s > 0 else None


@dataclass(frozen=True)
class Race:
    prompt: str
    config: SpecConfig
    target_only: TargetOnlyLane
    speculative: SpeculativeLane
    warmup_tokens: int = 0              # both lanes ran this many tokens untimed first (one-time start-up costs)

    @property
    def identical(self) -> bool:
        """Both lanes produced the same tokens."""
        return self.target_only.token_ids == self.speculative.token_ids

    @property
    def speedup(self) -> float | None:
        """Speculative tokens/s over target-only tokens/s (None when either lane has no rate)."""
        fast = tokens_per_s(len(self.speculative.token_ids), self.speculative.wall_s)
        slow = tokens_per_s(len(self.target_only.token_ids), self.target_only.wall_s)
        return fast / slow if fast is not None and slow else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RACE_SCHEMA,
            "prompt": self.prompt,
            "config": self.config.to_dict(),
            "warmup_tokens": self.warmup_tokens,
            "target_only": {"wall_s": self.target_only.wall_s,
                            "tokens": [{"id": t.token.id, "text": t.token.text, "t_s": t.t_s}
                                       for t in self.target_only.tokens]},
            "speculative": {"wall_s": self.speculative.wall_s,
                            "steps": [{"t_s": step.t_s, "tokens": [{"id": t.id, "text": t.text, "kind": t.kind}
                                                                   for t in step.tokens]}
                                      for step in self.speculative.steps]},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> "Race":
        from engine.formats.race_reader import read_race
        return read_race(text)

    @classmethod
    def load(cls, path: str | Path) -> "Race":
        return cls.from_json(read_document(path, MAX_RACE_BYTES, RaceFormatError, "race"))


@dataclass(frozen=True)
class RaceProgress:
    """Where a race being run is: `lane` is "warm-up", "target-only", "speculative" or "done" (then
    `race` is set); `tokens` counts the current lane's tokens so far."""

    lane: str
    tokens: int = 0
    race: Race | None = None
