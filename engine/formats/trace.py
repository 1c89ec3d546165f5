"""Trace: a whole run (config, prompt, output, steps) and its JSON form `specviz.trace/2`.

`Trace.to_dict()` writes the schema of docs/architecture.md §3; `Trace.from_dict()`
reads it back strictly through engine/formats/trace_reader.py (a hand-edited or truncated file gets
one clear TraceFormatError, never a KeyError), so recorded traces replay without a model;
`first_steps` cuts a trace as it stood after n steps, for replays.
A tree run's steps add `tree` (engine/formats/trace_tree.py reads it); a chain's steps have none.
An audited trace adds `audit` (engine/formats/trace_audit.py reads it).
Files in `specviz.trace/1` still load: their KV `cutoff` is read as given and their
`stale` is unknown (None); such a trace is written back as /1.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config import SpecConfig
from engine.device_costs import DeviceCosts
from engine.formats.json_document import parse_json, read_document
from engine.metrics import BaselineStats, Summary, summarize
from engine.records import CacheLengths, StepRecord

if TYPE_CHECKING:
    from engine.formats.trace_audit import TraceAudit

SCHEMA = "specviz.trace/2"            # what to_dict() writes
SCHEMA_V1 = "specviz.trace/1"         # still read: KV records without `stale`
SPLITS = ("provisional", "unsplit")   # Trace.split: steps another engine did not report as such
MAX_TRACE_BYTES = 20 * 1024 * 1024


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
    device_costs: DeviceCosts | None = None   # the machine's forwards measured when the pair loaded (a GPU)
    # Why a static cache ran this run without its CUDA graphs (a capture that failed at Run time,
    # docs/architecture.md §7): one sentence for the status line, saved with the trace when there is one.
    eager_reason: str | None = None
    # Another engine's steps that are not what it reported (docs/architecture.md §3 and §10): "provisional"
    # (a live vLLM run's chunks standing in for steps until the server's per-step counts arrive) or
    # "unsplit" (they never did: each token alone with its arrival time, no verdicts); None: measured steps.
    split: str | None = None
    # Each emitted token scored by a target SpecViz loaded itself (engine/formats/trace_audit.py): the marks a page
    # draws on another engine's run; None: not audited.
    audit: TraceAudit | None = None

    @property
    def summary(self) -> Summary:
        """The steps' summary (engine/metrics.py); an external engine's histogram spans its k, as it reports it."""
        return summarize(self.steps, self.wall_s, self.baseline, self.config.k if self.config.is_external else 0)

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
        document = {
            "schema": schema,
            "config": self.config.to_dict(),
            "prompt": _plain(self.prompt),
            "output": _plain(self.output),
            "steps": steps,
            "summary": _plain(self.summary) | {"speedup": self.summary.speedup},
            "complete": self.complete,
        }
        if self.device_costs is not None:
            document["device_costs"] = self.device_costs.to_dict()
        if self.eager_reason is not None:
            document["eager_reason"] = self.eager_reason
        if self.split is not None:
            document["split"] = self.split
        if self.audit is not None:
            document["audit"] = self.audit.to_dict()
        return document

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Any) -> "Trace":
        from engine.formats.trace_reader import parse_trace  # the reader imports Trace: import it on use
        return parse_trace(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        return cls.from_dict(parse_json(text, MAX_TRACE_BYTES, TraceFormatError, "trace"))

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_json(read_document(path, MAX_TRACE_BYTES, TraceFormatError, "trace"))


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
    for cache in filter(None, data["kv"].values()):
        if cache["capacity"] is None:     # a dynamic cache: its record reads as before static caches existed
            del cache["masked"], cache["capacity"]
    data["timing_ms"] = data.pop("timing")
    if data["timing_ms"]["engine"] is None:
        del data["timing_ms"]["engine"]
    if data["tree"] is None:        # chains record no tree: their steps read as before trees existed
        del data["tree"]
    for token in data["draft"]:     # a draft the engine returned reads as before other engines existed
        if token["origin"] == "engine":
            del token["origin"]
    return data


def cache_records(step: StepRecord) -> list[tuple[str, CacheLengths]]:
    """(name, lengths) of each cache the step recorded: the target's, and the draft model's if any."""
    return [(name, cache) for name, cache in (("target", step.kv_target), ("draft", step.kv_draft)) if cache is not None]


def _stale_known(steps: tuple[StepRecord, ...]) -> bool:
    return all(cache.stale is not None for step in steps for _, cache in cache_records(step))


def emitted_places(trace: Trace) -> list[tuple[int, StepRecord, int]]:
    """(position among the run's emitted tokens, its step, its place among the step's emitted tokens) of each
    emitted token, in order: where a per-token record (an audit's probabilities) meets the steps."""
    places, position = [], 0
    for step in trace.steps:
        for j in range(len(step.emitted)):
            places.append((position, step, j))
            position += 1
    return places


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
        complete=trace.complete and count >= len(trace.steps),
        audit=trace.audit.first(len(emitted)) if trace.audit is not None else None)
