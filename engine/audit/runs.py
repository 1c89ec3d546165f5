"""What the audit reads (torch-free): runs of emitted tokens, from a SpecViz trace or from an
emitted-tokens document `specviz.emitted/1`, which bench.py's vLLM rows save (one run per
request: its prompt ids, emitted ids, sampling settings and the tokens each engine step emitted).

    {"schema": "specviz.emitted/1", "runs": [{"name", "engine", "prompt_token_ids", "token_ids",
      "temperature", "top_k", "top_p", "step_sizes" (optional: tokens per engine step),
      "step_drafted" (optional: drafts per engine step, so the last token of a step reads as
      recovered or bonus)}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.formats.json_document import parse_json, read_document
from engine.formats.trace import TraceFormatError
from engine.formats.trace_fields import WHOLE, FieldReader
from engine.formats.trace_reader import parse_trace

EMITTED_SCHEMA = "specviz.emitted/1"
MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class EmittedRun:
    name: str
    engine: str                               # who emitted the tokens ("vllm 0.32.0", "specviz")
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    temperature: float
    top_k: int = 0
    top_p: float = 1.0
    step_sizes: tuple[int, ...] | None = None  # tokens each engine step emitted, in order
    step_drafted: tuple[int, ...] | None = None  # drafts each engine step verified (0 for a prefill step)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "engine": self.engine, "prompt_token_ids": list(self.prompt_ids),
                "token_ids": list(self.token_ids), "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "step_sizes": None if self.step_sizes is None else list(self.step_sizes),
                "step_drafted": None if self.step_drafted is None else list(self.step_drafted)}


def emitted_document(runs: list[EmittedRun]) -> dict[str, Any]:
    return {"schema": EMITTED_SCHEMA, "runs": [run.to_dict() for run in runs]}


def read_runs(path: str | Path) -> list[EmittedRun]:
    """The runs in a trace file or an emitted-tokens document; TraceFormatError says what is wrong."""
    data = parse_json(read_document(path, MAX_BYTES, TraceFormatError, "document"), MAX_BYTES, TraceFormatError,
                      "document")
    if not isinstance(data, dict):
        raise TraceFormatError(f"{Path(path).name} must hold a JSON object, got {type(data).__name__}")
    if data.get("schema") == EMITTED_SCHEMA:
        return [_run(reader) for reader in FieldReader(data, "", "document").items("runs")]
    trace = parse_trace(data)
    config = trace.config
    return [EmittedRun(Path(path).stem, config.target or "specviz", trace.prompt.token_ids, trace.output.token_ids,
                       config.temperature, config.top_k, config.top_p,
                       tuple(len(step.emitted) for step in trace.steps), tuple(step.k for step in trace.steps))]


def _run(reader: FieldReader) -> EmittedRun:
    steps = reader.values("step_sizes", WHOLE, optional=True)
    drafted = reader.values("step_drafted", WHOLE, optional=True)
    run = EmittedRun(reader.str("name"), reader.str("engine"), reader.values("prompt_token_ids", WHOLE),
                     reader.values("token_ids", WHOLE), reader.num("temperature"), reader.int("top_k"),
                     reader.num("top_p"), steps, drafted)
    if drafted is not None and (steps is None or len(drafted) != len(steps)):
        raise TraceFormatError(f"{reader.path('step_drafted')} needs one count per step of "
                               f"{reader.path('step_sizes')}")
    if steps is not None and sum(steps) != len(run.token_ids):
        raise TraceFormatError(f"{reader.path('step_sizes')} adds up to {sum(steps)} tokens, but "
                               f"{reader.path('token_ids')} holds {len(run.token_ids)}")
    if not 0 < run.top_p <= 1:
        raise TraceFormatError(f"{reader.path('top_p')} must be in (0, 1], got {run.top_p!r}")
    return run
