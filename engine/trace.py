"""Trace: a whole run (config, prompt, output, steps) and its JSON form `specviz.trace/2`.

`Trace.to_dict()` writes the schema of DESIGN.md sections 3 and 3b; `Trace.from_dict()`
reads it back strictly (a hand-edited or truncated file gets one clear
TraceFormatError, never a KeyError), so recorded traces replay without a model.
Files in `specviz.trace/1` still load: their KV `cutoff` is read as given and their
`stale` is unknown (None); such a trace is written back as /1.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from engine.config import MAX_K, ConfigError, SpecConfig
from engine.metrics import BaselineStats, Summary, summarize
from engine.records import (EMIT_KINDS, VERDICTS, Alternative, CacheLengths, DraftToken, EmittedToken,
                            StepRecord, StepTiming, TargetToken, Token)

SCHEMA = "specviz.trace/2"            # what to_dict() writes
SCHEMA_V1 = "specviz.trace/1"         # still read: KV records without `stale`
MAX_TRACE_BYTES = 20 * 1024 * 1024
MAX_WHOLE = 2**31 - 1                 # ids, lengths, counts: far above any vocabulary or context
MAX_AMOUNT = 1e12                     # milliseconds, seconds, tokens per second
PROBABILITY_SLACK = 1e-6              # float32 rounding: a recorded probability may read 1.0000001


class TraceFormatError(ValueError):
    """The data is not a valid specviz.trace/2 (or /1) document; the message says where."""


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
        """The specviz.trace/2 document; /1 (no `stale`) for a trace read from a /1 file."""
        steps = [_step_to_dict(step) for step in self.steps]
        schema = SCHEMA if _stale_known(self.steps) else SCHEMA_V1
        if schema == SCHEMA_V1:
            for step in steps:
                for cache in filter(None, step["kv"].values()):
                    del cache["stale"]
        return {
            "schema": schema,
            "config": self.config.to_dict(),
            "prompt": _plain(self.prompt),
            "output": _plain(self.output),
            "steps": steps,
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
        except ValueError:            # valid syntax, but a number past Python's 4300-digit limit
            raise TraceFormatError("not a trace: it holds a number thousands of digits long") from None
        except RecursionError:
            raise TraceFormatError("not a trace: its JSON is nested too deeply to read") from None
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


@dataclass(frozen=True)
class _Kind:
    """What a value must be: a test, and the words for it in an error message."""

    test: Callable[[Any], bool]
    words: str


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_text(value: Any) -> bool:
    """A string that can go out as UTF-8: no lone surrogate (JSON's \\ud800 escape reads into one)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# NaN fails every comparison, so each range test below also refuses it.
WHOLE = _Kind(lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_WHOLE,
              f"a whole number from 0 to {MAX_WHOLE}")
DRAFT_COUNT = _Kind(lambda v: WHOLE.test(v) and v <= MAX_K, f"a whole number from 0 to {MAX_K}")
AMOUNT = _Kind(lambda v: _is_number(v) and 0 <= v <= MAX_AMOUNT, f"a number from 0 to {MAX_AMOUNT:g}")
PROBABILITY = _Kind(lambda v: _is_number(v) and -PROBABILITY_SLACK <= v <= 1 + PROBABILITY_SLACK, "a probability")
PROBABILITY_OR_NULL = _Kind(lambda v: v is None or PROBABILITY.test(v), "a probability or null")
TEXT = _Kind(_is_text, "a string")
BOOL = _Kind(lambda v: isinstance(v, bool), "true or false")
LIST = _Kind(lambda v: isinstance(v, list), "a list")
OBJECT = _Kind(lambda v: isinstance(v, dict), "an object")
VERDICT = _Kind(lambda v: isinstance(v, str) and v in VERDICTS, f"one of {', '.join(VERDICTS)}")
EMIT_KIND = _Kind(lambda v: isinstance(v, str) and v in EMIT_KINDS, f"one of {', '.join(EMIT_KINDS)}")
INT64 = _Kind(lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63,
              "a whole number below 2**63")
CONFIG_KINDS = {                      # SpecConfig's field types; SpecConfig checks the ranges itself
    "int": INT64,
    "float": _Kind(lambda v: INT64.test(v) or isinstance(v, float) and -math.inf < v < math.inf, "a finite number"),
    "bool": BOOL,
    "str": TEXT,
}


def _show(value: Any) -> str:
    """The start of `value` as JSON, for an error message (its type where JSON cannot show it)."""
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError, RecursionError):
        return type(value).__name__


class _Reader:
    """Typed field access with error messages that name the path of the bad field."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise TraceFormatError(f"{where or 'trace'} must be an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: _Kind, optional: bool = False) -> Any:
        """The value at `key`, of `kind`; None for a missing or null optional field."""
        path = self.path(key)
        if key not in self.data:
            if optional:
                return None
            raise TraceFormatError(f"missing field {path}")
        value = self.data[key]
        if value is None and optional:
            return None
        _expect(value, kind, path)
        return value

    def int(self, key: str, optional: bool = False) -> int:
        return self.get(key, WHOLE, optional)

    def num(self, key: str, optional: bool = False) -> float:
        return self.get(key, AMOUNT, optional)

    def prob(self, key: str, optional: bool = False) -> float | None:
        return self.get(key, PROBABILITY_OR_NULL if optional else PROBABILITY, optional)

    def str(self, key: str) -> str:
        return self.get(key, TEXT)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, BOOL, optional=True)
        return default if value is None else value

    def list(self, key: str, optional: bool = False) -> list[Any]:
        value = self.get(key, LIST, optional)
        return [] if value is None else value

    def values(self, key: str, kind: _Kind, optional: bool = False) -> tuple[Any, ...] | None:
        """The list at `key`, every item of `kind`; None for a missing or null optional list."""
        items = self.get(key, LIST, optional)
        if items is None:
            return None
        for index, item in enumerate(items):
            _expect(item, kind, f"{self.path(key)}[{index}]")
        return tuple(items)

    def obj(self, key: str, optional: bool = False) -> "_Reader | None":
        value = self.get(key, OBJECT, optional)
        return None if value is None else _Reader(value, self.path(key))

    def items(self, key: str, optional: bool = False) -> list["_Reader"]:
        return [_Reader(item, f"{self.path(key)}[{i}]") for i, item in enumerate(self.list(key, optional))]


def _expect(value: Any, kind: _Kind, path: str) -> None:
    if not kind.test(value):
        raise TraceFormatError(f"{path} must be {kind.words}, got {_show(value)}")


def _alternatives(reader: _Reader) -> tuple[Alternative, ...]:
    return tuple(Alternative(r.int("id"), r.str("text"), r.prob("prob")) for r in reader.items("top", optional=True))


def _cache(reader: _Reader | None) -> CacheLengths | None:
    if reader is None:
        return None
    return CacheLengths(reader.int("before"), reader.int("after_forward"), reader.int("cutoff"), reader.int("after_cutoff"),
                        reader.int("stale", optional=True))


def _caches(step: StepRecord) -> list[tuple[str, CacheLengths]]:
    return [(name, cache) for name, cache in (("target", step.kv_target), ("draft", step.kv_draft)) if cache is not None]


def _stale_known(steps: tuple[StepRecord, ...]) -> bool:
    return all(cache.stale is not None for step in steps for _, cache in _caches(step))


def _check_caches(steps: tuple[StepRecord, ...], schema: str) -> None:
    """Each cache's lengths tell one story: a step starts where the last one ended and its forward
    only appends. A /2 file records `stale` for every cache and its cutoff is what was removed
    (after_cutoff = after_forward - cutoff, stale never shrinks); a /1 file has no `stale` (unknown)
    and its lab modes recorded a cutoff that was never removed, so only the first rule applies."""
    previous: dict[str, CacheLengths] = {}
    for position, step in enumerate(steps):
        for name, cache in _caches(step):
            where = f"steps[{position}].kv.{name}"
            if schema == SCHEMA and cache.stale is None:
                raise TraceFormatError(f"missing field {where}.stale ({SCHEMA} records stale positions)")
            if schema == SCHEMA_V1 and cache.stale is not None:
                raise TraceFormatError(f"{where}.stale is not part of {SCHEMA_V1}: write the file as {SCHEMA}")
            last = previous.get(name)
            if last is not None and cache.before != last.after_cutoff:
                raise TraceFormatError(f"{where}.before is {cache.before} but the step before ended at "
                                       f"{last.after_cutoff}")
            if cache.after_forward < cache.before:
                raise TraceFormatError(f"{where}.after_forward ({cache.after_forward}) is below before ({cache.before})")
            if schema == SCHEMA:
                _check_cutoff(cache, last, where)
            previous[name] = cache


def _check_cutoff(cache: CacheLengths, last: CacheLengths | None, where: str) -> None:
    if cache.after_cutoff != cache.after_forward - cache.cutoff:
        raise TraceFormatError(f"{where}.after_cutoff ({cache.after_cutoff}) must be after_forward "
                               f"({cache.after_forward}) - cutoff ({cache.cutoff})")
    if cache.stale > cache.after_cutoff:
        raise TraceFormatError(f"{where}.stale ({cache.stale}) exceeds the cache length {cache.after_cutoff}")
    if last is not None and cache.stale < last.stale:
        raise TraceFormatError(f"{where}.stale fell from {last.stale} to {cache.stale} (stale positions only pile up)")


def _parse_step(r: _Reader) -> StepRecord:
    draft = tuple(DraftToken(d.int("id"), d.str("text"), d.prob("q", optional=True), _alternatives(d)) for d in r.items("draft"))
    target = tuple(TargetToken(t.int("id"), t.str("text"), t.prob("p", optional=True), _alternatives(t)) for t in r.items("target"))
    k = r.get("k", DRAFT_COUNT, optional=True)
    k = len(draft) if k is None else k
    accept_prob = r.values("accept_prob", PROBABILITY_OR_NULL, optional=True)
    draws = r.values("draws", PROBABILITY_OR_NULL, optional=True)
    kv = r.obj("kv")
    timing = r.obj("timing_ms")
    step = StepRecord(
        index=r.int("index"), context_len=r.int("context_len"), k=k,
        carryover=tuple(Token(c.int("id"), c.str("text")) for c in r.items("carryover", optional=True)),
        draft=draft, target=target, verdicts=r.values("verdicts", VERDICT),
        accept_prob=(None,) * k if accept_prob is None else accept_prob,
        draws=(None,) * k if draws is None else draws,
        num_accepted=r.int("num_accepted"),
        emitted=tuple(EmittedToken(e.int("id"), e.str("text"), e.get("kind", EMIT_KIND)) for e in r.items("emitted")),
        kv_target=_cache(kv.obj("target")), kv_draft=_cache(kv.obj("draft", optional=True)),
        timing=StepTiming(timing.num("draft"), timing.num("verify"), timing.num("total")),
        eos=r.bool("eos", False),
        residual=tuple(Alternative(a.int("id"), a.str("text"), a.prob("prob")) for a in r.items("residual", optional=True)),
        overlap=r.values("overlap", PROBABILITY, optional=True) or (),
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
    if len(step.accept_prob) != step.k or len(step.draws) != step.k or len(step.overlap) not in (0, step.k):
        problems.append(f"has k={step.k} but {len(step.accept_prob)} accept_prob, {len(step.draws)} draws and "
                        f"{len(step.overlap)} overlap values (k each; overlap may be empty)")
    if problems:
        raise TraceFormatError(f"{where} " + "; ".join(problems))
    accepted, kind = ("accepted",) * step.num_accepted, "bonus" if step.num_accepted == step.k else "recovered"
    if step.verdicts != (accepted + ("rejected",) + ("unverified",) * step.k)[:step.k]:
        raise TraceFormatError(f"{where}.verdicts must be {step.num_accepted} accepted, then one rejected and the "
                               "rest unverified")
    if tuple(token.kind for token in step.emitted) != (accepted + (kind,))[:len(step.emitted)]:
        raise TraceFormatError(f"{where}.emitted must be the {step.num_accepted} accepted drafts, then the {kind} "
                               "token (cut short only by EOS or the token limit)")


def _parse_trace(data: Any) -> Trace:
    root = _Reader(data, "")
    schema = data.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        raise TraceFormatError(f"schema must be {SCHEMA!r} or {SCHEMA_V1!r}, got {schema!r}")
    config = _config(root.obj("config"))
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
                  prompt=TextTokens(prompt.str("text"), prompt.values("token_ids", WHOLE)),
                  output=TextTokens(output.str("text"), output.values("token_ids", WHOLE)),
                  steps=steps, wall_s=summary.num("wall_s"), baseline=baseline,
                  complete=root.bool("complete", True))
    _check_consistency(trace, summary)
    _check_caches(steps, schema)
    return trace


def _config(reader: _Reader) -> SpecConfig:
    """The run's SpecConfig: each field it knows, of its declared type, then SpecConfig's own checks."""
    fields = [field for field in dataclasses.fields(SpecConfig) if field.name in reader.data]
    values = {field.name: reader.get(field.name, CONFIG_KINDS[getattr(field.type, "__name__", field.type)])
              for field in fields}
    try:
        return SpecConfig(**values)
    except ConfigError as error:
        culprit = next((name for name in values if _complaint(values, name) != str(error)), None)
        raise TraceFormatError(f"{reader.where if culprit is None else reader.path(culprit)}: {error}") from None


def _complaint(values: dict[str, Any], default: str) -> str | None:
    """SpecConfig's complaint about `values` with the field `default` left at its default (None: no complaint)."""
    try:
        SpecConfig(**{name: value for name, value in values.items() if name != default})
    except ConfigError as error:
        return str(error)
    return None


def _check_consistency(trace: Trace, stored: _Reader) -> None:
    committed = len(trace.prompt.token_ids)
    for position, step in enumerate(trace.steps):
        where = f"steps[{position}]"
        if step.index != position:
            raise TraceFormatError(f"{where}.index must be {position} (steps count from 0), got {step.index}")
        if step.context_len != committed:
            raise TraceFormatError(f"{where}.context_len must be {committed} (the prompt and the tokens emitted "
                                   f"before it), got {step.context_len}")
        if step.eos and position < len(trace.steps) - 1:
            raise TraceFormatError(f"{where}.eos is true, but steps follow it")
        committed += step.num_emitted
    emitted_ids = tuple(token.id for step in trace.steps for token in step.emitted)
    if emitted_ids != trace.output.token_ids:
        raise TraceFormatError("output.token_ids differ from the tokens its steps emitted")
    derived = trace.summary
    for name in ("new_tokens", "steps", "drafted", "accepted"):
        if stored.int(name) != getattr(derived, name):
            raise TraceFormatError(f"summary.{name} is {stored.int(name)} but the steps give {getattr(derived, name)}")
