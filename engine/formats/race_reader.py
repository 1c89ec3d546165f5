"""Read a `specviz.race/1` document (engine/formats/race.py) back, strictly: a person may upload any
file, so whatever is accepted replays completely, and anything else is one RaceFormatError
naming the bad field's path (`speculative.steps[2].tokens[0].kind must be one of ...`).
Torch-free; fields are read with engine/formats/trace_fields.py's typed reader."""

from __future__ import annotations

from typing import Any

from engine.formats.json_document import parse_json
from engine.formats.race import (MAX_RACE_BYTES, RACE_SCHEMA, LaneToken, Race, RaceFormatError, RaceStep, SpeculativeLane,
                         TargetOnlyLane, TimedToken)
from engine.formats.trace import TraceFormatError
from engine.formats.trace_fields import AMOUNT, EMIT_KIND, TEXT, WHOLE, FieldReader
from engine.formats.trace_reader import _config as read_config


def read_race(text: str | bytes) -> Race:
    """The race in `text` (JSON), or RaceFormatError."""
    return race_from_dict(parse_json(text, MAX_RACE_BYTES, RaceFormatError, "race"))


def race_from_dict(data: Any) -> Race:
    try:
        return _race(FieldReader(data, "", document="race"))
    except TraceFormatError as error:          # the shared field reader's error type, raised as the race's
        raise RaceFormatError(str(error)) from None


def _race(root: FieldReader) -> Race:
    schema = root.get("schema", TEXT)
    if schema != RACE_SCHEMA:
        raise RaceFormatError(f"schema must be {RACE_SCHEMA!r}, got {schema[:40]!r}")
    prompt = root.str("prompt")
    config = read_config(root.obj("config"))
    warmup = root.int("warmup_tokens", optional=True) or 0
    target_only = _target_only(root.obj("target_only"), config.max_new_tokens)
    speculative = _speculative(root.obj("speculative"), config.max_new_tokens)
    return Race(prompt, config, target_only, speculative, warmup)


def _target_only(lane: FieldReader, max_tokens: int) -> TargetOnlyLane:
    wall_s = lane.get("wall_s", AMOUNT)
    tokens = []
    for item in lane.items("tokens"):
        tokens.append(TimedToken(LaneToken(item.get("id", WHOLE), item.get("text", TEXT)), item.get("t_s", AMOUNT)))
    _check_times([token.t_s for token in tokens], wall_s, lane.path("tokens"))
    _check_count(len(tokens), max_tokens, lane.path("tokens"))
    return TargetOnlyLane(tuple(tokens), wall_s)


def _speculative(lane: FieldReader, max_tokens: int) -> SpeculativeLane:
    wall_s = lane.get("wall_s", AMOUNT)
    steps = []
    for step in lane.items("steps"):
        tokens = tuple(LaneToken(item.get("id", WHOLE), item.get("text", TEXT), item.get("kind", EMIT_KIND))
                       for item in step.items("tokens"))
        if not tokens:
            raise RaceFormatError(f"{step.path('tokens')} must hold at least one token (every step emits one)")
        target_made = [i for i, token in enumerate(tokens) if token.kind != "accepted"]
        if target_made and target_made != [len(tokens) - 1]:
            raise RaceFormatError(f"{step.path('tokens')} may hold one recovered or bonus token, after the accepted "
                                  "drafts, got it at position " + ", ".join(str(i) for i in target_made))
        steps.append(RaceStep(step.get("t_s", AMOUNT), tokens))
    _check_times([step.t_s for step in steps], wall_s, lane.path("steps"))
    _check_count(sum(len(step.tokens) for step in steps), max_tokens, lane.path("steps"))
    return SpeculativeLane(tuple(steps), wall_s)


def _check_times(times: list[float], wall_s: float, where: str) -> None:
    for index, (before, after) in enumerate(zip(times, times[1:]), start=1):
        if after < before:
            raise RaceFormatError(f"{where}[{index}].t_s is {after:g}, earlier than the one before it ({before:g})")
    if times and times[-1] > wall_s:
        raise RaceFormatError(f"{where}[{len(times) - 1}].t_s is {times[-1]:g}, after the lane's wall_s ({wall_s:g})")


def _check_count(count: int, max_tokens: int, where: str) -> None:
    if count > max_tokens:
        raise RaceFormatError(f"{where} hold {count} tokens, more than config.max_new_tokens ({max_tokens})")
