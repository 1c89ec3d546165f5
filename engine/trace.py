"""Trace: a whole run (config, prompt, output, steps) and its JSON form `specviz.trace/1`.

`Trace.to_dict()` writes the schema of DESIGN.md section 3; `Trace.from_dict()`
reads it back strictly (a hand-edited or truncated file gets one clear
TraceFormatError, never a KeyError), so recorded traces replay without a model.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.config import ConfigError, SpecConfig
from engine.metrics import BaselineStats, Summary, summarize
from engine.records import (EMIT_KINDS, VERDICTS, Alternative, CacheLengths, DraftToken, EmittedToken,
                            StepRecord, StepTiming, TargetToken, Token)

SCHEMA = "specviz.trace/1"
MAX_TRACE_BYTES = 20 * 1024 * 1024


class TraceFormatError(ValueError):
    """The data is not a valid specviz.trace/1 document; the message says where."""


@dataclass(frozen=True)
class TextTokens:
    text: str
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class Trace:
    config: SpecConfig
    prompt: TextTokens
    output: TextTokens
    steps: tuple[StepRecord, ...]
    wall_s: float
    baseline: BaselineStats | None = None
    complete: bool = True            # False while streaming or after Stop

    @property
    def summary(self) -> Summary:
        return summarize(self.steps, self.wall_s, self.baseline)

    def with_baseline(self, baseline: BaselineStats) -> "Trace":
        return dataclasses.replace(self, baseline=baseline)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "config": self.config.to_dict(),
            "prompt": _plain(self.prompt),
            "output": _plain(self.output),
            "steps": [_step_to_dict(step) for step in self.steps],
            "summary": _plain(self.summary) | {"speedup": self.summary.speedup},
            "complete": self.complete,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Any) -> "Trace":
        return _parse_trace(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        if len(text) > MAX_TRACE_BYTES:
            raise TraceFormatError(f"trace is {len(text) // 1024} KiB, over the {MAX_TRACE_BYTES // 1024 // 1024} MiB limit")
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise TraceFormatError(f"not valid JSON ({error.msg if hasattr(error, 'msg') else error}); "
                                   "the file may be truncated") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        path = Path(path)
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceFormatError(f"{path.name} is over the {MAX_TRACE_BYTES // 1024 // 1024} MiB trace size limit")
        return cls.from_json(path.read_bytes())


def _plain(value: Any) -> Any:
    """Dataclasses and tuples to dicts and lists, for JSON."""
    if dataclasses.is_dataclass(value):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


def _step_to_dict(step: StepRecord) -> dict[str, Any]:
    data = _plain(step)
    data["kv"] = {"target": data.pop("kv_target"), "draft": data.pop("kv_draft")}
    data["timing_ms"] = data.pop("timing")
    return data


class _Reader:
    """Typed field access with error messages that name the path of the bad field."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise TraceFormatError(f"{where or 'trace'} must be an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, check: Callable[[Any], bool], kind: str, optional: bool = False) -> Any:
        path = self.path(key)
        if key not in self.data:
            if optional:
                return None
            raise TraceFormatError(f"missing field {path}")
        value = self.data[key]
        if value is None and optional:
            return None
        if not check(value):
            raise TraceFormatError(f"{path} must be {kind}, got {json.dumps(value)[:40]}")
        return value

    def int(self, key: str, optional: bool = False) -> int:
        return self._get(key, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0", optional)

    def num(self, key: str, optional: bool = False) -> float:
        return self._get(key, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                         "a number", optional)

    def prob(self, key: str, optional: bool = False) -> float | None:
        return self._get(key, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and -1e-6 <= v <= 1 + 1e-6,
                         "a probability", optional)

    def str(self, key: str) -> str:
        return self._get(key, lambda v: isinstance(v, str), "a string")

    def bool(self, key: str, default: bool) -> bool:
        value = self._get(key, lambda v: isinstance(v, bool), "true or false", optional=True)
        return default if value is None else value

    def list(self, key: str, optional: bool = False) -> list[Any]:
        value = self._get(key, lambda v: isinstance(v, list), "a list", optional)
        return [] if value is None else value

    def obj(self, key: str, optional: bool = False) -> "_Reader | None":
        value = self._get(key, lambda v: isinstance(v, dict), "an object", optional)
        return None if value is None else _Reader(value, self.path(key))

    def items(self, key: str, optional: bool = False) -> list["_Reader"]:
        return [_Reader(item, f"{self.path(key)}[{i}]") for i, item in enumerate(self.list(key, optional))]


def _alternatives(reader: _Reader) -> tuple[Alternative, ...]:
    return tuple(Alternative(r.int("id"), r.str("text"), r.prob("prob")) for r in reader.items("top", optional=True))


def _cache(reader: _Reader | None) -> CacheLengths | None:
    if reader is None:
        return None
    return CacheLengths(reader.int("before"), reader.int("after_forward"), reader.int("cutoff"), reader.int("after_cutoff"))


def _parse_step(r: _Reader) -> StepRecord:
    verdicts = tuple(r.list("verdicts"))
    if any(v not in VERDICTS for v in verdicts):
        raise TraceFormatError(f"{r.where}.verdicts holds an unknown verdict")
    emitted = tuple(EmittedToken(e.int("id"), e.str("text"), e.str("kind")) for e in r.items("emitted"))
    if any(e.kind not in EMIT_KINDS for e in emitted):
        raise TraceFormatError(f"{r.where}.emitted holds an unknown kind")
    draft = tuple(DraftToken(d.int("id"), d.str("text"), d.prob("q", optional=True), _alternatives(d)) for d in r.items("draft"))
    target = tuple(TargetToken(t.int("id"), t.str("text"), t.prob("p", optional=True), _alternatives(t)) for t in r.items("target"))
    kv = r.obj("kv")
    timing = r.obj("timing_ms")
    step = StepRecord(
        index=r.int("index"), context_len=r.int("context_len"), k=r.int("k", optional=True) or len(draft),
        carryover=tuple(Token(c.int("id"), c.str("text")) for c in r.items("carryover", optional=True)),
        draft=draft, target=target, verdicts=verdicts,
        accept_prob=tuple(r.list("accept_prob", optional=True)) or (None,) * len(draft),
        draws=tuple(r.list("draws", optional=True)) or (None,) * len(draft),
        num_accepted=r.int("num_accepted"), emitted=emitted,
        kv_target=_cache(kv.obj("target")), kv_draft=_cache(kv.obj("draft", optional=True)),
        timing=StepTiming(timing.num("draft"), timing.num("verify"), timing.num("total")),
        eos=r.bool("eos", False),
        residual=tuple(Alternative(a.int("id"), a.str("text"), a.prob("prob")) for a in r.items("residual", optional=True)),
        overlap=tuple(r.list("overlap", optional=True)),
    )
    _check_step(step, r.where)
    return step


def _check_step(step: StepRecord, where: str) -> None:
    problems = []
    if len(step.draft) != step.k or len(step.verdicts) != step.k:
        problems.append(f"has k={step.k} but {len(step.draft)} draft tokens and {len(step.verdicts)} verdicts")
    if len(step.target) != step.k + 1:
        problems.append(f"needs k+1={step.k + 1} target entries, has {len(step.target)}")
    if step.num_accepted != step.verdicts.count("accepted") or step.num_accepted > step.k:
        problems.append(f"says {step.num_accepted} accepted but its verdicts accept {step.verdicts.count('accepted')}")
    if len(step.emitted) > step.num_accepted + 1 or (not step.emitted):
        problems.append(f"emits {len(step.emitted)} tokens after {step.num_accepted} accepted")
    if problems:
        raise TraceFormatError(f"{where} " + "; ".join(problems))


def _parse_trace(data: Any) -> Trace:
    root = _Reader(data, "")
    schema = data.get("schema")
    if schema != SCHEMA:
        raise TraceFormatError(f"schema must be {SCHEMA!r}, got {schema!r}")
    try:
        config = SpecConfig.from_dict(root.obj("config").data)
    except (ConfigError, TypeError) as error:
        raise TraceFormatError(f"config: {error}") from None
    prompt, output = root.obj("prompt"), root.obj("output")
    steps = tuple(_parse_step(r) for r in root.items("steps"))
    summary = root.obj("summary")
    baseline_reader = summary.obj("baseline", optional=True)
    baseline = None
    if baseline_reader is not None:
        baseline = BaselineStats(baseline_reader.num("tokens_per_s"), baseline_reader.bool("identical", False),
                                 baseline_reader.num("wall_s", optional=True) or 0.0,
                                 baseline_reader.bool("exact_expected", True))
    trace = Trace(config=config,
                  prompt=TextTokens(prompt.str("text"), tuple(prompt.list("token_ids"))),
                  output=TextTokens(output.str("text"), tuple(output.list("token_ids"))),
                  steps=steps, wall_s=summary.num("wall_s"), baseline=baseline,
                  complete=root.bool("complete", True))
    _check_consistency(trace, summary)
    return trace


def _check_consistency(trace: Trace, stored: _Reader) -> None:
    emitted_ids = tuple(token.id for step in trace.steps for token in step.emitted)
    if emitted_ids != trace.output.token_ids:
        raise TraceFormatError("output.token_ids differ from the tokens its steps emitted")
    derived = trace.summary
    for name in ("new_tokens", "steps", "drafted", "accepted"):
        if stored.int(name) != getattr(derived, name):
            raise TraceFormatError(f"summary.{name} is {stored.int(name)} but the steps give {getattr(derived, name)}")
