"""A run on a vLLM server as a Generation (specviz/serving/runner.py): `step()` waits for the next
chunk and returns its step, `trace()` is a valid Trace at any point; once the final chunk brings
the per-step arrays the trace is rebuilt from them (docs/architecture.md §12)."""

from __future__ import annotations

from engine.config import SpecConfig
from engine.formats.trace import Trace
from engine.records import StepRecord
from engine.vllm.ngram import DEFAULT_LOOKUP
from engine.vllm.server_info import ServerInfo
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S


class VllmGeneration:
    def __init__(self, info: ServerInfo, prompt: str, config: SpecConfig, *,
                 read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
                 ngram_lookup: tuple[int, int] = DEFAULT_LOOKUP): ...

    @property
    def is_done(self) -> bool: ...

    def step(self) -> StepRecord: ...

    def trace(self) -> Trace: ...


def start_generation(address: str, prompt: str, config: SpecConfig, method: str = "draft_model", dtype: str = "",
                     expected_model: str = "") -> VllmGeneration: ...
